"""Gemma 4's language model from the text encoder files of ComfyUI's newest templates: LTX-2.5's text encoder
(text_encoders/gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors, Lightricks/LTX-2.5) and its prompt
enhancer (text_encoders/gemma4_e2b_it_int8_convrot.safetensors, Comfy-Org/gemma-4).

Key layout (ComfyUI's comfy/text_encoders/gemma4.py Gemma4Transformer, whose attribute names are transformers'
Gemma4TextModel's): the language model under `model.` (or `model.language_model.`, the Hugging Face multimodal
name), `embed_tokens`, `layers.N.{self_attn.{q,k,v,o}_proj, self_attn.{q,k}_norm, mlp.{gate,up,down}_proj,
{input,post_attention,pre_feedforward,post_feedforward}_layernorm, layer_scalar}`, `norm`; with per-layer inputs
(E2B) also `embed_tokens_per_layer`, `per_layer_model_projection`, `per_layer_projection_norm` and per layer
`per_layer_input_gate`, `per_layer_projection`, `post_per_layer_input_norm`. Vision and audio towers and the LTX
projections beside it are not part of the language model. Quantized layers (`comfy_quant`) are dequantized first
(nodes/models/comfy_quant.py).

What no shape carries comes from ComfyUI's Gemma4 configs: a global (full-attention) layer is one whose q_norm is
the wider `global_head_dim`; a global layer without `v_proj` reuses its K projection as V (`attention_k_eq_v`,
the 12B) with its own K head count; layers whose MLP is twice as wide as layer 0's are the KV-shared tail
(`use_double_wide_mlp`, E2B: ComfyUI widens exactly the layers from `num_hidden_layers - num_kv_shared_layers`);
sliding windows are 512 with per-layer inputs (E2B/E4B) and 1024 without (12B, 31B); RoPE theta 10,000 on sliding
layers and 1,000,000 on a quarter of each global head (proportional); RMSNorm scales are applied as stored (no
Gemma 3 `1 + w`). The network itself is transformers' Gemma4TextModel (ComfyUI's notes name transformers as its
reference and list only rounding-level divergences)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import torch

from nodes.models.comfy_quant import dequantize
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.safetensors_io import build_module

MARKER = "layers.0.layer_scalar"  # Gemma 4's own tensor: Gemma 3 and every other LLM here have none
PREFIXES = ("model.language_model.", "model.")
SLIDING_THETA, GLOBAL_THETA, GLOBAL_ROTARY = 10_000.0, 1_000_000.0, 0.25
SLIDING_WITH_PER_LAYER_INPUT, SLIDING_WITHOUT = 512, 1024
SOFTCAP = 30.0
_LAYER = re.compile(r"layers\.(\d+)\.")


def is_gemma4(keys) -> bool:
    return any(k.endswith(MARKER) for k in keys)


def language_model_prefix(keys) -> str | None:
    """Where the language model's tensors start in a file (`model.`), None if the file holds no Gemma 4."""
    prefix = find_prefix(keys, MARKER)
    if prefix is None or prefix not in PREFIXES:
        return None
    return prefix


def text_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Gemma4TextConfig arguments from the language model's unprefixed tensors."""
    layers = 1 + max(int(m.group(1)) for k in sd if (m := _LAYER.match(k)))
    vocab, hidden = sd["embed_tokens.weight"].shape
    norms = [sd[f"layers.{i}.self_attn.q_norm.weight"].shape[0] for i in range(layers)]
    head_dim, global_head_dim = min(norms), max(norms)
    if head_dim == global_head_dim:
        raise ValueError("every layer's q_norm has the same width: no global attention layer can be told apart")
    types = ["full_attention" if n == global_head_dim else "sliding_attention" for n in norms]
    first_global = types.index("full_attention")
    k_eq_v = f"layers.{first_global}.self_attn.v_proj.weight" not in sd
    heads = sd["layers.0.self_attn.q_proj.weight"].shape[0] // head_dim
    kv_heads = sd["layers.0.self_attn.k_proj.weight"].shape[0] // head_dim
    global_kv = sd[f"layers.{first_global}.self_attn.k_proj.weight"].shape[0] // global_head_dim
    widths = [sd[f"layers.{i}.mlp.gate_proj.weight"].shape[0] for i in range(layers)]
    intermediate = widths[0]
    wide = [i for i, w in enumerate(widths) if w == 2 * intermediate]
    if any(w not in (intermediate, 2 * intermediate) for w in widths) or wide != list(
        range(layers - len(wide), layers)
    ):
        raise ValueError(f"MLP widths {sorted(set(widths))} are neither uniform nor a doubled tail")
    per_layer = (
        sd["layers.0.per_layer_input_gate.weight"].shape[0] if "layers.0.per_layer_input_gate.weight" in sd else 0
    )
    config: dict[str, Any] = {
        "vocab_size": int(vocab),
        "hidden_size": int(hidden),
        "intermediate_size": int(intermediate),
        "num_hidden_layers": layers,
        "num_attention_heads": int(heads),
        "num_key_value_heads": int(kv_heads),
        "head_dim": int(head_dim),
        "global_head_dim": int(global_head_dim),
        "layer_types": types,
        "attention_k_eq_v": k_eq_v,
        "num_kv_shared_layers": len(wide),
        "use_double_wide_mlp": bool(wide),
        "hidden_size_per_layer_input": int(per_layer),
        "vocab_size_per_layer_input": int(vocab),
        "sliding_window": SLIDING_WITH_PER_LAYER_INPUT if per_layer else SLIDING_WITHOUT,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": SLIDING_THETA},
            "full_attention": {
                "rope_type": "proportional",
                "partial_rotary_factor": GLOBAL_ROTARY,
                "rope_theta": GLOBAL_THETA,
            },
        },
        "rms_norm_eps": 1e-6,
        "final_logit_softcapping": SOFTCAP,
        "tie_word_embeddings": True,
        "use_cache": False,
    }
    if k_eq_v:
        config["num_global_key_value_heads"] = int(global_kv)
    elif global_kv != kv_heads:
        raise ValueError(f"global layers have {global_kv} K heads but {kv_heads} elsewhere, and a v_proj")
    return config


def _unused_shared_kv(sd: Mapping[str, torch.Tensor], config: Mapping[str, Any]) -> list[str]:
    """ComfyUI's KV-shared layers keep K/V projections they never run; transformers builds none."""
    first = config["num_hidden_layers"] - config["num_kv_shared_layers"]
    names = ("k_proj.weight", "v_proj.weight", "k_norm.weight")
    return [k for k in sd if (m := _LAYER.match(k)) and int(m.group(1)) >= first and k.endswith(names)]


def load_language_model(sd: Mapping[str, torch.Tensor], path: str | None = None) -> torch.nn.Module:
    """transformers' Gemma4TextModel (float32) from a file's tensors, found under its `model.` prefix."""
    from transformers import Gemma4TextConfig
    from transformers.models.gemma4.modeling_gemma4 import Gemma4TextModel

    prefix = language_model_prefix(sd)
    if prefix is None:
        raise ModelLoadError(path, f"no Gemma 4 language model in this file (no {PREFIXES[-1]}{MARKER})")
    lm = dequantize(strip_prefix(sd, prefix), path, torch.float32)
    try:
        config = text_config(lm)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a Gemma 4 language model layout ({e})") from None
    for key in _unused_shared_kv(lm, config):
        del lm[key]
    weights = {k: v.float() for k, v in lm.items()}
    model = build_module(
        lambda: _with_real_buffers(Gemma4TextModel(Gemma4TextConfig(**config))), weights, path, "Gemma 4 language model"
    )
    return model.eval()


def _with_real_buffers(model: torch.nn.Module) -> torch.nn.Module:
    """The rotary frequencies and the embedding scales are computed, not stored: built on the CPU while the rest
    waits on the meta device (ComfyUI scales by the full-precision square roots, as these do)."""
    config = model.config
    with torch.device("cpu"):
        model.rotary_emb = type(model.rotary_emb)(config=config)
        model.embed_tokens.register_buffer("embed_scale", torch.tensor(config.hidden_size**0.5), persistent=False)
        if config.hidden_size_per_layer_input:
            scale = torch.tensor(config.hidden_size_per_layer_input**0.5)
            model.embed_tokens_per_layer.register_buffer("embed_scale", scale, persistent=False)
    return model
