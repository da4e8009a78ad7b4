"""`comfy.sd1_clip`: ComfyUI's SD1 text encoder classes, names packs check a CLIP against or list (Easy-Use
lists SD1ClipModel among the models to unload). Building an encoder refuses (see text_encoder_classes); the
tokenizers are real (comfy.tokenizers).

The prompt-weight helpers ("(word:1.2)" parsing) are the tokenizer's own (nodes.models.tokenizer), under
ComfyUI's names; the textual-inversion embedding loaders are nodes.models.embeddings."""

from __future__ import annotations

from comfy_bridge.compat.comfy.text_encoder_classes import refusing_class
from comfy_bridge.compat.comfy.tokenizers import SD1Tokenizer, SDTokenizer
from nodes.models.embeddings import expand_directory_list, load_embed, safe_load_embed_zip
from nodes.models.tokenizer import _top_level_groups, escape_parens, parse_weights, unescape_parens

MODULE = "comfy.sd1_clip"

ClipTokenWeightEncoder = refusing_class(MODULE, "ClipTokenWeightEncoder", object)
SDClipModel = refusing_class(MODULE, "SDClipModel")
SD1ClipModel = refusing_class(MODULE, "SD1ClipModel")


def escape_important(text: str) -> str:
    """Hide "\\(" and "\\)" from the weight parser (ComfyUI's name)."""
    return escape_parens(text)


def unescape_important(text: str) -> str:
    """Turn what escape_important hid back into literal parentheses."""
    return unescape_parens(text)


def parse_parentheses(string: str) -> list[str]:
    """Split a prompt into plain runs and top-level "(...)" groups."""
    return _top_level_groups(string)


def token_weights(string: str, current_weight: float) -> list[tuple[str, float]]:
    """ "(a:1.2) b" -> [("a", 1.2), (" b", 1.0)]: the prompt's segments with their weights."""
    return parse_weights(string, current_weight)


__all__ = [
    "ClipTokenWeightEncoder",
    "SDClipModel",
    "SD1ClipModel",
    "SDTokenizer",
    "SD1Tokenizer",
    "escape_important",
    "unescape_important",
    "parse_parentheses",
    "token_weights",
    "safe_load_embed_zip",
    "expand_directory_list",
    "load_embed",
]
