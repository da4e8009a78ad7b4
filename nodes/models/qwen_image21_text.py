"""Qwen-Image 2.1's text encoder: Qwen3-VL-8B (CLIPLoader type qwen_image, ComfyUI's file qwen3vl_8b*.safetensors,
transformers' Qwen3VLForConditionalGeneration names: `model.language_model.*`, `model.visual.*`, `lm_head.*`).

As the newest ComfyUI source encodes a prompt for it (comfy/text_encoders/qwen_image21.py, qwen3vl.py): the prompt
(a space if empty) goes into Qwen-Image 2.1's chat template with a system turn and no weighting syntax, is
tokenized with Qwen2's tokenizer, and the conditioning is the last decoder layer's output before the final norm,
without the system turn (every token before the second <|im_start|>); no pooled vector. Only the language model
runs: prompts with reference images (the vision tower) are not supported yet. The sizes come from the shapes;
the rope theta, which no shape carries, is Qwen3-VL's (5,000,000)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.qwen3_text import count_layers
from nodes.models.qwen_tokenizer import QwenTokenizer, qwen_tokenizer
from nodes.models.safetensors_io import build_module
from nodes.models.tokenizer import escape_parens, unescape_parens
from nodes.models.zimage_text import tokenizer_dirs

SYSTEM = "<|im_start|>system\nComprehend and analyze the provided prompt.<|im_end|>\n"
TEMPLATE = SYSTEM + "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
IM_START = 151644
SUB = "qwen3vl_8b"  # ComfyUI's name for the sub-encoder (its token dict key)
LM = "model.language_model."
LM_MARKER = LM + "layers.0.self_attn.q_norm.weight"
ROPE_THETA = 5_000_000.0
RMS_NORM_EPS = 1e-6


def language_model_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Qwen3VLTextConfig arguments from the language model's (unprefixed, `layers.N...`) shapes."""
    vocab, hidden = sd["embed_tokens.weight"].shape
    head_dim = sd["layers.0.self_attn.q_norm.weight"].shape[0]
    q_out = sd["layers.0.self_attn.q_proj.weight"].shape[0]
    kv_out = sd["layers.0.self_attn.k_proj.weight"].shape[0]
    if q_out % head_dim or kv_out % head_dim:
        raise ValueError(f"attention widths {q_out}/{kv_out} are not multiples of the head dim {head_dim}")
    return {
        "vocab_size": int(vocab),
        "hidden_size": int(hidden),
        "intermediate_size": int(sd["layers.0.mlp.gate_proj.weight"].shape[0]),
        "num_hidden_layers": count_layers(sd, "layers."),
        "num_attention_heads": int(q_out // head_dim),
        "num_key_value_heads": int(kv_out // head_dim),
        "head_dim": int(head_dim),
        "rope_parameters": {"rope_type": "default", "rope_theta": ROPE_THETA},
        "rms_norm_eps": RMS_NORM_EPS,
    }


def build_language_model(state_dict: Mapping[str, torch.Tensor], path: str | None):
    """transformers' Qwen3VLTextModel from a Qwen3-VL file's `model.language_model.` weights (bare, or under a
    checkpoint prefix); the dtype is the file's."""
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextModel

    prefix = find_prefix(state_dict.keys(), LM_MARKER)
    if prefix is None:
        raise ModelLoadError(path, f"no Qwen3-VL language model weights ({LM_MARKER})")
    sd = strip_prefix(state_dict, prefix + LM)  # the vision tower and the LM head are not read
    try:
        config = Qwen3VLTextConfig(**language_model_config(sd))
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Qwen3-VL text encoder: {e}") from None

    def skeleton():
        model = Qwen3VLTextModel(config)
        with torch.device("cpu"):  # rotary frequencies are computed, not stored
            model.rotary_emb = type(model.rotary_emb)(config=config)
        return model

    return build_module(skeleton, sd, path, "Qwen3-VL text encoder", dtype=sd["embed_tokens.weight"].dtype)


@dataclass
class QwenImage21TextEncoder(TextEncoder):
    tokenizer: QwenTokenizer | None = None

    def tokenize(self, text: str) -> dict[str, list[list[tuple[int, float]]]]:
        # ComfyUI: weights disabled ("\(" still becomes "("), an empty prompt read as one space.
        plain = unescape_parens(escape_parens(text)) or " "
        return {SUB: [[(t, 1.0) for t in self.tokenizer.encode(TEMPLATE.format(plain))]]}

    @torch.no_grad()
    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, None]:
        ids = [t for chunk in tokens[SUB] for t, _ in chunk]
        model = self.modules[SUB]
        captured: list[torch.Tensor] = []
        handle = model.layers[-1].register_forward_hook(
            lambda module, args, output: captured.append(output[0] if isinstance(output, tuple) else output)
        )
        try:
            model(input_ids=torch.tensor([ids], device=model.embed_tokens.weight.device), use_cache=False)
        finally:
            handle.remove()
        starts = [i for i, t in enumerate(ids) if t == IM_START]
        keep = starts[1] if len(starts) > 1 else 0  # drop the system turn
        return captured[0][:, keep:].float(), None


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> QwenImage21TextEncoder:
    """Qwen-Image 2.1's CLIP object from CLIPLoader's Qwen3-VL file."""
    if isinstance(state_dicts, Mapping):
        state_dicts = [state_dicts]
    path = ref.sources[0] if ref.sources else None
    sd = next((s for s in state_dicts if find_prefix(s.keys(), LM_MARKER) is not None), None)
    if sd is None:
        raise ModelLoadError(path, "Qwen-Image 2.1 needs a Qwen3-VL text encoder (qwen3vl_8b.safetensors); none found")
    model = build_language_model(sd, path)
    return QwenImage21TextEncoder(
        arch="qwen_image21", modules={SUB: model}, layer=None, tokenizer=qwen_tokenizer(tokenizer_dirs(), path)
    )
