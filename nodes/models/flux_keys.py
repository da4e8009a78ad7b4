"""Flux transformer key layouts: BFL/ComfyUI (`double_blocks.N.img_attn.qkv`) <-> diffusers
(`transformer_blocks.N.attn.to_q`). Every dimension is read from the tensor shapes, so the conversion
works for any hidden size, head count, block count and MLP width (diffusers' own converter assumes 3072).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import torch

BFL_MARKER = "double_blocks.0.img_attn.qkv.weight"
DIFFUSERS_MARKER = "x_embedder.weight"

# BFL name -> diffusers name, for tensors that map one to one (per-block names are relative to the block).
_GLOBAL = {
    "img_in": "x_embedder",
    "txt_in": "context_embedder",
    "time_in.in_layer": "time_text_embed.timestep_embedder.linear_1",
    "time_in.out_layer": "time_text_embed.timestep_embedder.linear_2",
    "vector_in.in_layer": "time_text_embed.text_embedder.linear_1",
    "vector_in.out_layer": "time_text_embed.text_embedder.linear_2",
    "guidance_in.in_layer": "time_text_embed.guidance_embedder.linear_1",
    "guidance_in.out_layer": "time_text_embed.guidance_embedder.linear_2",
    "final_layer.linear": "proj_out",
}
_DOUBLE = {
    "img_mod.lin": "norm1.linear",
    "txt_mod.lin": "norm1_context.linear",
    "img_attn.proj": "attn.to_out.0",
    "txt_attn.proj": "attn.to_add_out",
    "img_mlp.0": "ff.net.0.proj",
    "img_mlp.2": "ff.net.2",
    "txt_mlp.0": "ff_context.net.0.proj",
    "txt_mlp.2": "ff_context.net.2",
}
_DOUBLE_NORMS = {
    "img_attn.norm.query_norm.scale": "attn.norm_q.weight",
    "img_attn.norm.key_norm.scale": "attn.norm_k.weight",
    "txt_attn.norm.query_norm.scale": "attn.norm_added_q.weight",
    "txt_attn.norm.key_norm.scale": "attn.norm_added_k.weight",
}
_SINGLE = {"modulation.lin": "norm.linear", "linear2": "proj_out"}
_SINGLE_NORMS = {"norm.query_norm.scale": "attn.norm_q.weight", "norm.key_norm.scale": "attn.norm_k.weight"}
_QKV = {
    "img_attn.qkv": ("attn.to_q", "attn.to_k", "attn.to_v"),
    "txt_attn.qkv": ("attn.add_q_proj", "attn.add_k_proj", "attn.add_v_proj"),
}
_LINEAR1 = ("attn.to_q", "attn.to_k", "attn.to_v", "proj_mlp")


def find_prefix(keys: Iterable[str], marker: str) -> str | None:
    """The prefix P such that P + marker is a key and P is empty or ends with a dot."""
    for k in keys:
        if k.endswith(marker):
            p = k[: len(k) - len(marker)]
            if p == "" or p.endswith("."):
                return p
    return None


def strip_prefix(sd: Mapping[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix) :]: v for k, v in sd.items() if k.startswith(prefix)}


def _swap_halves(t: torch.Tensor) -> torch.Tensor:
    # BFL's final adaLN emits (shift, scale); diffusers' AdaLayerNormContinuous emits (scale, shift).
    a, b = t.chunk(2, dim=0)
    return torch.cat([b, a], dim=0)


def _block_index(keys: Iterable[str], name: str) -> list[int]:
    pat = re.compile(rf"^{re.escape(name)}\.(\d+)\.")
    return sorted({int(m.group(1)) for k in keys if (m := pat.match(k))})


def bfl_to_diffusers(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Convert an unprefixed BFL-layout Flux state dict to diffusers' FluxTransformer2DModel layout."""
    hidden = sd["img_in.weight"].shape[0]
    out: dict[str, torch.Tensor] = {}
    used: set[str] = set()

    def take(src: str) -> torch.Tensor:
        used.add(src)
        return sd[src]

    for b, d in _GLOBAL.items():
        for end in ("weight", "bias"):
            if f"{b}.{end}" in sd:
                out[f"{d}.{end}"] = take(f"{b}.{end}")
    for end in ("weight", "bias"):
        out[f"norm_out.linear.{end}"] = _swap_halves(take(f"final_layer.adaLN_modulation.1.{end}"))

    for i in _block_index(sd, "double_blocks"):
        src, dst = f"double_blocks.{i}.", f"transformer_blocks.{i}."
        for b, d in _DOUBLE.items():
            for end in ("weight", "bias"):
                out[f"{dst}{d}.{end}"] = take(f"{src}{b}.{end}")
        for b, d in _DOUBLE_NORMS.items():
            out[dst + d] = take(src + b)
        for b, parts in _QKV.items():
            for end in ("weight", "bias"):
                for d, t in zip(parts, take(f"{src}{b}.{end}").split(hidden, dim=0)):
                    out[f"{dst}{d}.{end}"] = t

    for i in _block_index(sd, "single_blocks"):
        src, dst = f"single_blocks.{i}.", f"single_transformer_blocks.{i}."
        for b, d in _SINGLE.items():
            for end in ("weight", "bias"):
                out[f"{dst}{d}.{end}"] = take(f"{src}{b}.{end}")
        for b, d in _SINGLE_NORMS.items():
            out[dst + d] = take(src + b)
        for end in ("weight", "bias"):
            w = take(f"{src}linear1.{end}")
            sizes = [hidden, hidden, hidden, w.shape[0] - 3 * hidden]
            for d, t in zip(_LINEAR1, w.split(sizes, dim=0)):
                out[f"{dst}{d}.{end}"] = t

    unknown = sorted(set(sd) - used)
    if unknown:
        raise ValueError(f"unsupported Flux weights (not plain Flux.1): {unknown[:8]}")
    return {k: v.contiguous() for k, v in out.items()}


def diffusers_to_bfl(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The inverse of `bfl_to_diffusers`: diffusers' FluxTransformer2DModel layout to BFL keys."""
    out: dict[str, torch.Tensor] = {}
    for b, d in _GLOBAL.items():
        for end in ("weight", "bias"):
            if f"{d}.{end}" in sd:
                out[f"{b}.{end}"] = sd[f"{d}.{end}"]
    for end in ("weight", "bias"):
        out[f"final_layer.adaLN_modulation.1.{end}"] = _swap_halves(sd[f"norm_out.linear.{end}"])

    for i in _block_index(sd, "transformer_blocks"):
        src, dst = f"transformer_blocks.{i}.", f"double_blocks.{i}."
        for b, d in _DOUBLE.items():
            for end in ("weight", "bias"):
                out[f"{dst}{b}.{end}"] = sd[f"{src}{d}.{end}"]
        for b, d in _DOUBLE_NORMS.items():
            out[dst + b] = sd[src + d]
        for b, parts in _QKV.items():
            for end in ("weight", "bias"):
                out[f"{dst}{b}.{end}"] = torch.cat([sd[f"{src}{d}.{end}"] for d in parts], dim=0)

    for i in _block_index(sd, "single_transformer_blocks"):
        src, dst = f"single_transformer_blocks.{i}.", f"single_blocks.{i}."
        for b, d in _SINGLE.items():
            for end in ("weight", "bias"):
                out[f"{dst}{b}.{end}"] = sd[f"{src}{d}.{end}"]
        for b, d in _SINGLE_NORMS.items():
            out[dst + b] = sd[src + d]
        for end in ("weight", "bias"):
            out[f"{dst}linear1.{end}"] = torch.cat([sd[f"{src}{d}.{end}"] for d in _LINEAR1], dim=0)
    return {k: v.contiguous() for k, v in out.items()}


def count_blocks(keys: Iterable[str], name: str) -> int:
    return len(_block_index(keys, name))
