"""Qwen3 language models as text encoders (Z-Image and Flux2-Klein use Qwen3-4B), on transformers' Qwen3Model.

Files are in the layout ComfyUI's repackaged `text_encoders/qwen_3_4b.safetensors` has (transformers'
Qwen3ForCausalLM names: `model.embed_tokens.weight`, `model.layers.N.self_attn.q_proj.weight`, ...,
`model.norm.weight`, optionally `lm_head.weight`), bare or under a checkpoint prefix. The sizes are read from
the shapes; rope theta and the norm epsilon, which no shape carries, are Qwen3's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch

from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.safetensors_io import build_module
from nodes.models.text_encoder_dtype import text_encoder_compute_dtype

MARKER = "model.layers.0.self_attn.q_norm.weight"  # Qwen3 has per-head q/k norms; Qwen2/2.5 and Llama do not
ROPE_THETA = 1_000_000.0
RMS_NORM_EPS = 1e-6
MAX_POSITIONS = 40960


def find_qwen3_prefix(keys: Iterable[str]) -> str | None:
    """The prefix in front of `model.layers...` (empty for a bare file), or None when there is no Qwen3."""
    return find_prefix(keys, MARKER)


def count_layers(keys: Iterable[str], prefix: str = "model.layers.") -> int:
    return len({k[len(prefix) :].split(".", 1)[0] for k in keys if k.startswith(prefix)})


def qwen3_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Qwen3Config arguments from an unprefixed state dict's shapes (layers, width, heads, kv heads, MLP)."""
    vocab, hidden = sd["model.embed_tokens.weight"].shape
    head_dim = sd["model.layers.0.self_attn.q_norm.weight"].shape[0]
    q_out = sd["model.layers.0.self_attn.q_proj.weight"].shape[0]
    kv_out = sd["model.layers.0.self_attn.k_proj.weight"].shape[0]
    if q_out % head_dim or kv_out % head_dim:
        raise ValueError(f"attention widths {q_out}/{kv_out} are not multiples of the head dim {head_dim}")
    return {
        "vocab_size": int(vocab),
        "hidden_size": int(hidden),
        "intermediate_size": int(sd["model.layers.0.mlp.gate_proj.weight"].shape[0]),
        "num_hidden_layers": count_layers(sd),
        "num_attention_heads": int(q_out // head_dim),
        "num_key_value_heads": int(kv_out // head_dim),
        "head_dim": int(head_dim),
        "rope_theta": ROPE_THETA,
        "rms_norm_eps": RMS_NORM_EPS,
        "max_position_embeddings": MAX_POSITIONS,
        "tie_word_embeddings": False,
        "attention_bias": "model.layers.0.self_attn.q_proj.bias" in sd,
    }


def build_qwen3(state_dict: Mapping[str, torch.Tensor], path: str | None):
    """transformers' Qwen3Model (no LM head) from a Qwen3 state dict in ComfyUI's / transformers' layout,
    bare or prefixed (`text_encoders.qwen3_4b.transformer.`); it computes in float32 whatever the file's dtype (nodes/models/text_encoder_dtype.py)."""
    from transformers import Qwen3Config, Qwen3Model

    prefix = find_qwen3_prefix(state_dict.keys())
    if prefix is None:
        raise ModelLoadError(path, "no Qwen3 text encoder weights (model.layers.0.self_attn.q_norm.weight)")
    sd = strip_prefix(state_dict, prefix) if prefix else dict(state_dict)
    try:
        config = Qwen3Config(**qwen3_config(sd))
    except KeyError as e:
        raise ModelLoadError(path, f"not a usable Qwen3 text encoder: missing {e}") from None
    except ValueError as e:
        raise ModelLoadError(path, f"not a usable Qwen3 text encoder: {e}") from None
    weights = {k[len("model.") :]: v for k, v in sd.items() if k.startswith("model.")}
    dtype = text_encoder_compute_dtype(weights["embed_tokens.weight"].dtype)
    return build_module(lambda: with_real_rotary(Qwen3Model(config)), weights, path, "Qwen3 text encoder", dtype=dtype)


def with_real_rotary(model):
    """Rotary frequencies are computed, not stored: build that one submodule on the CPU, not the meta device."""
    with torch.device("cpu"):
        model.rotary_emb = type(model.rotary_emb)(config=model.config)
    return model


@torch.no_grad()
def qwen3_hidden_states(
    model, ids: torch.Tensor, attention_mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, ...]:
    """transformers' hidden states of a causal pass: entry i < L is the input of layer i (entry 0 the token
    embeddings, entry i the output of layer i - 1), entry L the final-normed output. ComfyUI's
    `layer="hidden", layer_idx=-2` (Z-Image) is entry L - 1; its layer lists ([9, 18, 27], Flux2-Klein)
    are entries 9, 18, 27. `attention_mask` (1 keep, 0 padding) as ComfyUI passes it."""
    device = model.embed_tokens.weight.device
    ids = ids.to(device)
    mask = torch.ones_like(ids) if attention_mask is None else attention_mask.to(device)
    out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True, use_cache=False)
    return tuple(out.hidden_states)


@torch.no_grad()
def qwen3_layer_output(
    model, ids: torch.Tensor, layer: int, attention_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """The output of decoder layer `layer` (negative counts from the end, as ComfyUI's layer_idx: -2 is the
    second-to-last), before any final norm: what ComfyUI's `layer="hidden"` conditioning is."""
    n = len(model.layers)
    index = n + layer if layer < 0 else layer
    if not 0 <= index < n:
        raise ValueError(f"layer {layer} does not exist in a {n}-layer text encoder")
    captured: list[torch.Tensor] = []
    handle = model.layers[index].register_forward_hook(
        lambda module, args, output: captured.append(output[0] if isinstance(output, tuple) else output)
    )
    try:
        qwen3_hidden_states(model, ids, attention_mask)
    finally:
        handle.remove()
    return captured[0]
