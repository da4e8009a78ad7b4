"""diffusers' Flux2Transformer2DModel keys -> BFL's (the layout of flux-2-klein-4b.safetensors), the inverse of
diffusers' own single-file converter (which nodes.models.flux2 uses for reading). Writing BFL files is what the
tiny demo model and the key-layout tests need."""

from __future__ import annotations

import re
from collections.abc import Mapping

import torch

_GLOBAL = {
    "x_embedder": "img_in",
    "context_embedder": "txt_in",
    "time_guidance_embed.timestep_embedder.linear_1": "time_in.in_layer",
    "time_guidance_embed.timestep_embedder.linear_2": "time_in.out_layer",
    "time_guidance_embed.guidance_embedder.linear_1": "guidance_in.in_layer",
    "time_guidance_embed.guidance_embedder.linear_2": "guidance_in.out_layer",
    "double_stream_modulation_img.linear": "double_stream_modulation_img.lin",
    "double_stream_modulation_txt.linear": "double_stream_modulation_txt.lin",
    "single_stream_modulation.linear": "single_stream_modulation.lin",
    "proj_out": "final_layer.linear",
}
_DOUBLE = {
    "attn.to_out.0.weight": "img_attn.proj.weight",
    "attn.to_add_out.weight": "txt_attn.proj.weight",
    "attn.norm_q.weight": "img_attn.norm.query_norm.scale",
    "attn.norm_k.weight": "img_attn.norm.key_norm.scale",
    "attn.norm_added_q.weight": "txt_attn.norm.query_norm.scale",
    "attn.norm_added_k.weight": "txt_attn.norm.key_norm.scale",
    "ff.linear_in.weight": "img_mlp.0.weight",
    "ff.linear_out.weight": "img_mlp.2.weight",
    "ff_context.linear_in.weight": "txt_mlp.0.weight",
    "ff_context.linear_out.weight": "txt_mlp.2.weight",
}
_QKV = {
    "img_attn.qkv.weight": ("attn.to_q.weight", "attn.to_k.weight", "attn.to_v.weight"),
    "txt_attn.qkv.weight": ("attn.add_q_proj.weight", "attn.add_k_proj.weight", "attn.add_v_proj.weight"),
}
_SINGLE = {
    "attn.to_qkv_mlp_proj.weight": "linear1.weight",
    "attn.to_out.weight": "linear2.weight",
    "attn.norm_q.weight": "norm.query_norm.scale",
    "attn.norm_k.weight": "norm.key_norm.scale",
}


def _swap_halves(t: torch.Tensor) -> torch.Tensor:
    # diffusers' AdaLayerNormContinuous emits (scale, shift); BFL's final layer (shift, scale).
    a, b = t.chunk(2, dim=0)
    return torch.cat([b, a], dim=0)


def _blocks(sd: Mapping[str, torch.Tensor], name: str) -> list[int]:
    pat = re.compile(rf"^{re.escape(name)}\.(\d+)\.")
    return sorted({int(m.group(1)) for k in sd if (m := pat.match(k))})


def diffusers_to_bfl(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for src, dst in _GLOBAL.items():
        if f"{src}.weight" in sd:
            out[f"{dst}.weight"] = sd[f"{src}.weight"]
    out["final_layer.adaLN_modulation.1.weight"] = _swap_halves(sd["norm_out.linear.weight"])
    for i in _blocks(sd, "transformer_blocks"):
        src, dst = f"transformer_blocks.{i}.", f"double_blocks.{i}."
        for d, b in _DOUBLE.items():
            out[dst + b] = sd[src + d]
        for b, parts in _QKV.items():
            out[dst + b] = torch.cat([sd[src + p] for p in parts], dim=0)
    for i in _blocks(sd, "single_transformer_blocks"):
        src, dst = f"single_transformer_blocks.{i}.", f"single_blocks.{i}."
        for d, b in _SINGLE.items():
            out[dst + b] = sd[src + d]
    return {k: v.contiguous() for k, v in out.items()}
