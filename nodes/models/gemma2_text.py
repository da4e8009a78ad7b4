"""Gemma 2 (2B) as ComfyUI's text encoders use it (Lumina 2 / NetaYume's `gemma2_2b`; reusable by any family that
encodes with Gemma 2): transformers' Gemma2Model with ComfyUI's Gemma2_2B_Config choices, its tokenizer the
SentencePiece model the weights file carries.

Where the weights are (ComfyUI's layouts): a bare text encoder file (gemma_2_2b.safetensors) holds transformers'
names under `model.` and the tokenizer as the byte tensor `spiece_model`; a checkpoint ComfyUI saved holds them under
`text_encoders.gemma2_2b.transformer.model.` and `text_encoders.spiece_model` (comfy/sd.py's CLIP.get_sd adds the
tokenizer's state dict beside the encoder's; supported_models.Lumina2's text_encoders. prefix).

ComfyUI's computation, mirrored here: the prompt tokenized word by word with <bos> (2) in front, no end token, no
padding, one window; float32 activations; every layer full (causal) attention with no logit soft-capping and no
sliding window (ComfyUI's Llama2_ implements neither); the output is a layer's hidden state without the final
norm (layer_idx -2 by default); weighted tokens as ComfyUI weights them, against the encoding of <bos> and pads.
The file gives every size but the head width, which ComfyUI fixes at 256."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from transformers import Gemma2Config, Gemma2Model

from nodes.models.errors import ModelLoadError
from nodes.models.flux_tokenize import ChunkRules, tokenize_weighted
from nodes.models.safetensors_io import build_module
from nodes.models.wan_text import spiece_tokenizer

HEAD_DIM = 256  # ComfyUI's Gemma2_2B_Config.head_dim: the tensors cannot tell heads from head width
BOS, PAD = 2, 0
RULES = ChunkRules(start=BOS, end=None, pad=PAD, max_length=99_999_999, pad_to_max_length=False, min_length=1)
LAYER = -2  # ComfyUI's Gemma2_2BModel: layer="hidden", layer_idx=-2, no final norm
SPIECE_KEY = "spiece_model"
# Where a file keeps the encoder (the prefix before `layers.0.`) and its tokenizer, bare file first.
PREFIXES = ("model.", "text_encoders.gemma2_2b.transformer.model.", "gemma2_2b.transformer.model.")
SPIECE_KEYS = (SPIECE_KEY, "text_encoders.spiece_model", "text_encoders.gemma2_2b.spiece_model")
# Gemma's four norms per layer without Gemma 3's q/k norms.
MARKER = "layers.0.pre_feedforward_layernorm.weight"
NOT_MARKER = "layers.0.self_attn.q_norm.weight"


def find_gemma2_prefix(keys) -> str | None:
    """The prefix under which a file holds a Gemma 2 language model, or None."""
    keys = set(keys)
    return next((p for p in PREFIXES if p + MARKER in keys and p + NOT_MARKER not in keys), None)


def gemma2_sizes(sd: Mapping[str, torch.Tensor]) -> dict[str, int]:
    """Gemma 2's sizes from its unprefixed tensors (the head width is ComfyUI's fixed one)."""
    q_out = sd["layers.0.self_attn.q_proj.weight"].shape[0]
    kv_out = sd["layers.0.self_attn.k_proj.weight"].shape[0]
    if q_out % HEAD_DIM or kv_out % HEAD_DIM:
        raise ValueError(f"q/k projections {q_out}/{kv_out} wide are not whole {HEAD_DIM}-wide heads")
    return {
        "vocab": sd["embed_tokens.weight"].shape[0],
        "hidden": sd["embed_tokens.weight"].shape[1],
        "intermediate": sd["layers.0.mlp.gate_proj.weight"].shape[0],
        "layers": len({int(m.group(1)) for k in sd if (m := re.match(r"layers\.(\d+)\.", k))}),
        "heads": q_out // HEAD_DIM,
        "kv_heads": kv_out // HEAD_DIM,
    }


def gemma2_config(sizes: Mapping[str, int]) -> Gemma2Config:
    """transformers' Gemma 2 config at these sizes, computing as ComfyUI's Gemma2_2B does."""
    return Gemma2Config(
        vocab_size=sizes["vocab"],
        hidden_size=sizes["hidden"],
        intermediate_size=sizes["intermediate"],
        num_hidden_layers=sizes["layers"],
        num_attention_heads=sizes["heads"],
        num_key_value_heads=sizes["kv_heads"],
        head_dim=HEAD_DIM,
        query_pre_attn_scalar=HEAD_DIM,
        hidden_activation="gelu_pytorch_tanh",
        rms_norm_eps=1e-6,
        rope_theta=10000.0,
        max_position_embeddings=8192,
        attn_logit_softcapping=None,
        final_logit_softcapping=None,
        layer_types=["full_attention"] * sizes["layers"],
        pad_token_id=PAD,
        bos_token_id=BOS,
        use_cache=False,
        attn_implementation="eager",
    )


def _as_comfyui_computes(key: str, value: torch.Tensor) -> torch.Tensor:
    """A weight in float32. ComfyUI adds Gemma's 1 to an RMSNorm scale in the file's dtype (bfloat16 in the
    released files) and so rounds the sum; transformers adds it in float32, so it gets that rounded sum less 1."""
    if key.endswith("norm.weight") and value.dtype in (torch.bfloat16, torch.float16):
        return (value + 1.0).float() - 1.0
    return value.float()


def _with_real_buffers(model: Gemma2Model) -> Gemma2Model:
    """The rotary frequencies and the embedding scale are computed, not stored: built on the CPU while the
    weights wait on the meta device."""
    with torch.device("cpu"):
        model.rotary_emb = type(model.rotary_emb)(config=model.config)
        if hasattr(model, "embed_tokens") and "embed_scale" in dict(model.embed_tokens.named_buffers()):
            model.embed_tokens.register_buffer(
                "embed_scale", torch.tensor(model.config.hidden_size**0.5), persistent=False
            )
    return model


def build_gemma2(state_dict: Mapping[str, torch.Tensor], path: str | None) -> Gemma2Model:
    """Gemma2Model from a file's tensors (any of ComfyUI's layouts), in float32."""
    prefix = find_gemma2_prefix(state_dict.keys())
    if prefix is None:
        raise ModelLoadError(path, "no Gemma 2 text encoder in this file (no layers.0.pre_feedforward_layernorm)")
    sd = {
        k[len(prefix) :]: _as_comfyui_computes(k, v)
        for k, v in state_dict.items()
        if k.startswith(prefix) and k[len(prefix) :].split(".", 1)[0] in ("embed_tokens", "layers", "norm")
    }
    try:
        sizes = gemma2_sizes(sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Gemma 2 text encoder: {e}") from None
    return build_module(lambda: _with_real_buffers(Gemma2Model(gemma2_config(sizes))), sd, path, "Gemma 2")


def gemma2_tokenizer(state_dict: Mapping[str, torch.Tensor], path: str | None) -> tuple[Callable, bytes]:
    """(word-by-word encode, SentencePiece proto) from the tokenizer the file carries, as ComfyUI reads it."""
    spiece = next((state_dict[k] for k in SPIECE_KEYS if k in state_dict), None)
    if spiece is None:
        raise ModelLoadError(
            path, "the Gemma 2 weights come without their tokenizer (a spiece_model tensor, as ComfyUI's files hold it)"
        )
    proto = spiece.numpy().tobytes()
    return spiece_tokenizer(proto), proto


@torch.no_grad()
def gemma2_layer_output(
    model: Gemma2Model, ids: torch.Tensor, layer: int = LAYER, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """The hidden state after layer `layer` (negative: from the end, -1 the last) without the final norm, as
    ComfyUI's intermediate_output; a layer beyond the network's depth gives the final normed output, as ComfyUI's
    SDClipModel falls back to. [B, T, hidden] float32. `mask` [B, T]: 0 for keys no token attends to."""
    n = model.config.num_hidden_layers
    if abs(layer) > n:
        return model(input_ids=ids, attention_mask=mask).last_hidden_state.float()
    index = layer if layer >= 0 else n + layer
    if index < n - 1:
        states = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
        return states[index + 1].float()  # hidden_states: the embeddings, then each layer's output
    # transformers norms the last layer's output in hidden_states; ComfyUI's intermediate is before the norm.
    captured: list[torch.Tensor] = []
    hook = model.layers[index].register_forward_hook(
        lambda _m, _a, out: captured.append(out[0] if isinstance(out, tuple) else out)
    )
    try:
        model(input_ids=ids, attention_mask=mask)
    finally:
        hook.remove()
    return captured[0].float()


@dataclass
class Gemma2Encoder:
    """One Gemma 2 text encoder with its tokenizer: ComfyUI's tokens and hidden-state output."""

    model: Gemma2Model
    encode_words: Callable[[str], list[int]]
    proto: bytes

    def tokenize(self, text: str) -> list[list[tuple[int, float]]]:
        return tokenize_weighted(text, self.encode_words, RULES)

    def encode(self, chunks: list[list[tuple[int, float]]], layer: int = LAYER) -> torch.Tensor:
        pairs = [p for chunk in chunks for p in chunk]  # one window: the rules never split a prompt
        out = gemma2_layer_output(self.model, torch.tensor([[t for t, _ in pairs]], dtype=torch.long), layer)
        weights = torch.tensor([w for _, w in pairs], dtype=torch.float32).view(1, -1, 1)
        if bool((weights == 1.0).all()):
            return out
        # ComfyUI's token weighting: each weighted token's state moved from the "empty" prompt's state at its
        # position (<bos> then pads the encoder may not attend to) by its weight.
        empty = torch.full((1, len(pairs)), PAD, dtype=torch.long)
        empty[0, 0] = BOS
        mask = torch.zeros_like(empty)
        mask[0, 0] = 1
        base = gemma2_layer_output(self.model, empty, layer, mask)
        return torch.where(weights == 1.0, out, (out - base) * weights + base)


def load_gemma2(state_dict: Mapping[str, torch.Tensor], path: str | None) -> Gemma2Encoder:
    """Gemma 2 and its tokenizer from a bare text encoder file or a checkpoint that holds them."""
    encode_words, proto = gemma2_tokenizer(state_dict, path)
    return Gemma2Encoder(build_gemma2(state_dict, path), encode_words, proto)
