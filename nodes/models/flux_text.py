"""Flux's text encoder, ComfyUI's FluxClipModel: CLIP-L gives the pooled vector, T5-XXL the token states.

Loaded from one checkpoint (`text_encoders.clip_l.transformer.*`, `text_encoders.t5xxl.transformer.*`) or
from DualCLIPLoader's two files (HF layout, as ComfyUI's models/text_encoders holds them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import CLIPTextConfig, CLIPTextModel

from cluster.refs import ModelRef
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.flux_configs import config_for_sources
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.flux_tokenize import ChunkRules, encode_weighted, tokenize_weighted, with_tokenizer_options
from nodes.models.safetensors_io import build_module
from nodes.models.t5 import T5_MARKER, build_t5, t5_hidden_states, tokenizer_from_json, tokenizer_from_vocab
from nodes.models.t5_tokenizer import find_t5_tokenizer
from nodes.models.text_encoder_dtype import text_encoder_compute_dtype
from nodes.models.tokenizer import bpe_for_vocab_size, byte_level_bpe

CLIP_MARKER = "text_model.final_layer_norm.weight"
# ComfyUI's T5-XXL tokenizer for Flux: no start token, </s>=1 at the end, pad 0 up to at least 256 tokens.
T5_RULES = ChunkRules(start=None, end=1, pad=0, max_length=99_999_999, pad_to_max_length=False, min_length=256)

Tokenize = Callable[[str], list[int]]


def clip_rules(vocab_size: int) -> ChunkRules:
    """CLIP's 77-token windows: <|startoftext|> ... <|endoftext|>, padded with <|endoftext|> (the last two ids)."""
    return ChunkRules(
        start=vocab_size - 2, end=vocab_size - 1, pad=vocab_size - 1, max_length=77, pad_to_max_length=True
    )


def find_clip_tokenizer(weights_path: str | None, vocab_size: int, name: str | None) -> Tokenize:
    """CLIP-L's tokenizer: the byte-level vocab of the tiny demo CLIPs, a tokenizer.json beside the weights, or
    (as SD1/SDXL/SD3 find theirs) the OpenAI CLIP vocabulary a user placed or the project ships."""
    if name == "bytes":
        return byte_level_bpe().encode
    here = Path(weights_path).resolve().parent if weights_path else None
    for candidate in [here / "clip_tokenizer" / "tokenizer.json", here / "clip_l.tokenizer.json"] if here else []:
        if candidate.is_file():
            return tokenizer_from_json(candidate)
    return bpe_for_vocab_size(vocab_size, model_path=weights_path).encode


def clip_config(sd: Mapping[str, torch.Tensor], heads: int | None) -> CLIPTextConfig:
    emb = sd["text_model.embeddings.token_embedding.weight"]
    vocab, hidden = emb.shape
    layers = len({k.split(".")[3] for k in sd if k.startswith("text_model.encoder.layers.")})
    return CLIPTextConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        intermediate_size=sd["text_model.encoder.layers.0.mlp.fc1.weight"].shape[0],
        num_attention_heads=heads or _default_heads(hidden),
        max_position_embeddings=sd["text_model.embeddings.position_embedding.weight"].shape[0],
        hidden_act="quick_gelu",
        bos_token_id=vocab - 2,
        eos_token_id=vocab - 1,
        pad_token_id=vocab - 1,
    )


def _default_heads(hidden: int) -> int:
    """Heads are not in the weights: CLIP-L has 64-wide heads (12); narrower tiny models get 8-wide ones."""
    for width in (64, 8):
        if hidden % width == 0:
            return hidden // width
    return 1


def build_clip(sd: Mapping[str, torch.Tensor], path: str | None, heads: int | None) -> CLIPTextModel:
    cfg = clip_config(sd, heads)
    # Files use transformers 4's `text_model.` names; transformers 5's CLIPTextModel has no such level.
    # Projection, logit scale and position ids are not part of CLIPTextModel's weights.
    with torch.device("meta"):
        nested = hasattr(CLIPTextModel(cfg), "text_model")
    sd = {
        (k if nested else k[len("text_model.") :]): v
        for k, v in sd.items()
        if k.startswith("text_model.") and not k.endswith("position_ids")
    }
    dtype = text_encoder_compute_dtype(next(iter(sd.values())).dtype)
    return build_module(lambda: CLIPTextModel(cfg), sd, path, "CLIP-L text encoder", dtype=dtype)


@dataclass
class FluxTextEncoder(TextEncoder):
    tokenizers: dict[str, Tokenize] = field(default_factory=dict)
    rules: dict[str, ChunkRules] = field(default_factory=dict)

    def tokenize(self, text: str) -> dict[str, list[list[tuple[int, float]]]]:
        return {
            "l": tokenize_weighted(text, self.tokenizers["l"], self.rules["l"]),
            "t5xxl": tokenize_weighted(text, self.tokenizers["t5xxl"], self.rules["t5xxl"]),
        }

    @torch.no_grad()
    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, torch.Tensor | None]:
        clip, t5 = self.modules["clip_l"], self.modules["t5xxl"]

        def run_t5(ids: torch.Tensor) -> tuple[torch.Tensor, None]:
            return t5_hidden_states(t5, ids.to(t5.device), self.layer).float(), None

        def run_clip(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            out = clip(input_ids=ids.to(clip.device))
            return out.last_hidden_state.float(), out.pooler_output.float()

        cond, _ = encode_weighted(tokens["t5xxl"], self.rules["t5xxl"], run_t5)
        _, pooled = encode_weighted(tokens["l"], self.rules["l"], run_clip)
        return cond, pooled


def split_text_encoders(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]]
) -> dict[str, tuple[dict[str, torch.Tensor], str | None]]:
    """{"clip_l"/"t5xxl": (unprefixed state dict, source path)} found in the given state dicts."""
    found: dict[str, tuple[dict[str, torch.Tensor], str | None]] = {}
    for i, sd in enumerate(state_dicts):
        path = ref.sources[i] if i < len(ref.sources) else None
        for name, marker in (("clip_l", CLIP_MARKER), ("t5xxl", T5_MARKER)):
            prefix = find_prefix(sd.keys(), marker)
            if prefix is not None and name not in found:
                found[name] = (strip_prefix(sd, prefix), path)
    return found


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> FluxTextEncoder:
    """Flux's CLIP object from a checkpoint's state dict or DualCLIPLoader's clip_l + t5xxl state dicts."""
    if isinstance(state_dicts, Mapping):
        state_dicts = [state_dicts]
    found = split_text_encoders(ref, state_dicts)
    missing = [n for n in ("clip_l", "t5xxl") if n not in found]
    if missing:
        raise ModelLoadError(
            ref.sources[0] if ref.sources else None,
            f"Flux needs CLIP-L and T5-XXL text encoders; no {' or '.join(missing)} weights found",
        )
    config_folder, config = config_for_sources(ref.sources)
    clip_opts: dict[str, Any] = config.get("clip_l", {})
    t5_opts: dict[str, Any] = config.get("t5", {})

    clip_sd, clip_path = found["clip_l"]
    clip = build_clip(clip_sd, clip_path, clip_opts.get("num_attention_heads"))
    t5_sd, t5_path = found["t5xxl"]
    t5 = build_t5(t5_sd, t5_path)

    if config_folder is not None and "vocab" in t5_opts:
        t5_tok = tokenizer_from_vocab(config_folder / t5_opts["vocab"])
    else:
        t5_tok = find_t5_tokenizer(t5_path, t5.config.vocab_size)
    vocab = clip.config.vocab_size
    clip_tok = find_clip_tokenizer(clip_path, vocab, clip_opts.get("tokenizer"))
    layer = int(ref.option("layer", -1))
    return FluxTextEncoder(
        arch="flux",
        modules={"clip_l": clip, "t5xxl": t5},
        layer=layer,
        tokenizers={"l": clip_tok, "t5xxl": t5_tok},
        rules={
            "l": clip_rules(vocab),
            "t5xxl": with_tokenizer_options(T5_RULES, dict(ref.option("tokenizer_options", ())), "t5xxl"),
        },
    )
