"""SD3 (MMDiT) key layouts: ComfyUI/Stability (`joint_blocks.N.x_block.attn.qkv`) <-> diffusers'
SD3Transformer2DModel (`transformer_blocks.N.attn.to_q`). Written from the two published layouts; every size
is read from the tensors. SD3 Medium, SD3.5 Large (RMS qk-norm, `ln_q`/`ln_k`) and SD3.5 Medium (a second
image self-attention, `attn2`, in some blocks) convert."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import torch

MARKER = "joint_blocks.0.context_block.attn.qkv.weight"

# ComfyUI name -> diffusers name for tensors that map one to one (weight and bias alike).
_GLOBAL = {
    "x_embedder.proj": "pos_embed.proj",
    "t_embedder.mlp.0": "time_text_embed.timestep_embedder.linear_1",
    "t_embedder.mlp.2": "time_text_embed.timestep_embedder.linear_2",
    "y_embedder.mlp.0": "time_text_embed.text_embedder.linear_1",
    "y_embedder.mlp.2": "time_text_embed.text_embedder.linear_2",
    "context_embedder": "context_embedder",
    "final_layer.linear": "proj_out",
}
# Per joint block; the context side of the last block ("pre_only") has only its modulation.
_X = {
    "attn.proj": "attn.to_out.0",
    "adaLN_modulation.1": "norm1.linear",
    "mlp.fc1": "ff.net.0.proj",
    "mlp.fc2": "ff.net.2",
    "attn2.proj": "attn2.to_out.0",
}
_CONTEXT = {
    "attn.proj": "attn.to_add_out",
    "adaLN_modulation.1": "norm1_context.linear",
    "mlp.fc1": "ff_context.net.0.proj",
    "mlp.fc2": "ff_context.net.2",
}
_NORMS = {
    "x_block.attn.ln_q.weight": "attn.norm_q.weight",
    "x_block.attn.ln_k.weight": "attn.norm_k.weight",
    "context_block.attn.ln_q.weight": "attn.norm_added_q.weight",
    "context_block.attn.ln_k.weight": "attn.norm_added_k.weight",
    "x_block.attn2.ln_q.weight": "attn2.norm_q.weight",
    "x_block.attn2.ln_k.weight": "attn2.norm_k.weight",
}
_QKV = {
    "x_block.attn.qkv": ("attn.to_q", "attn.to_k", "attn.to_v"),
    "context_block.attn.qkv": ("attn.add_q_proj", "attn.add_k_proj", "attn.add_v_proj"),
    "x_block.attn2.qkv": ("attn2.to_q", "attn2.to_k", "attn2.to_v"),
}


def _swap_halves(t: torch.Tensor) -> torch.Tensor:
    # ComfyUI's final adaLN (and the pre-only context block's) emits (shift, scale); diffusers' emits (scale, shift).
    a, b = t.chunk(2, dim=0)
    return torch.cat([b, a], dim=0)


def block_indices(keys: Iterable[str], name: str) -> list[int]:
    pat = re.compile(rf"^{re.escape(name)}\.(\d+)\.")
    return sorted({int(m.group(1)) for k in keys if (m := pat.match(k))})


def _pairs(n: int) -> list[tuple[str, str, bool]]:
    """(ComfyUI prefix, diffusers prefix, swap halves) of the plain tensors of joint block n (last: pre-only)."""
    src, dst = f"joint_blocks.{n}.", f"transformer_blocks.{n}."
    return [(f"{src}x_block.{a}", dst + b, False) for a, b in _X.items()] + [
        (f"{src}context_block.{a}", dst + b, False) for a, b in _CONTEXT.items()
    ]


def mmdit_to_diffusers(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Unprefixed ComfyUI-layout MMDiT weights -> SD3Transformer2DModel's; unknown tensors raise ValueError."""
    out: dict[str, torch.Tensor] = {}
    used: set[str] = set()

    def move(src: str, dst: str, swap: bool = False) -> None:
        for end in ("weight", "bias"):
            if f"{src}.{end}" in sd:
                used.add(f"{src}.{end}")
                t = sd[f"{src}.{end}"]
                out[f"{dst}.{end}"] = _swap_halves(t) if swap else t

    out["pos_embed.pos_embed"] = sd["pos_embed"]
    used.add("pos_embed")
    for a, b in _GLOBAL.items():
        move(a, b)
    move("final_layer.adaLN_modulation.1", "norm_out.linear", swap=True)
    blocks = block_indices(sd, "joint_blocks")
    for n in blocks:
        pre_only = f"joint_blocks.{n}.context_block.attn.proj.weight" not in sd
        for a, b, _ in _pairs(n):
            move(a, b, swap=pre_only and b.endswith("norm1_context.linear"))
        for a, b in _NORMS.items():
            if f"joint_blocks.{n}.{a}" in sd:
                used.add(f"joint_blocks.{n}.{a}")
                out[f"transformer_blocks.{n}.{b}"] = sd[f"joint_blocks.{n}.{a}"]
        for a, parts in _QKV.items():
            for end in ("weight", "bias"):
                key = f"joint_blocks.{n}.{a}.{end}"
                if key in sd:
                    used.add(key)
                    for d, t in zip(parts, sd[key].chunk(3, dim=0)):
                        out[f"transformer_blocks.{n}.{d}.{end}"] = t
    unknown = sorted(set(sd) - used)
    if unknown:
        raise ValueError(f"unsupported MMDiT weights (not SD3/SD3.5): {unknown[:8]}")
    return {k: v.contiguous() for k, v in out.items()}


def diffusers_to_mmdit(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The inverse of `mmdit_to_diffusers` (the demo model is written in ComfyUI's layout with it)."""
    out: dict[str, torch.Tensor] = {"pos_embed": sd["pos_embed.pos_embed"]}

    def move(dst: str, src: str, swap: bool = False) -> None:
        for end in ("weight", "bias"):
            if f"{src}.{end}" in sd:
                t = sd[f"{src}.{end}"]
                out[f"{dst}.{end}"] = _swap_halves(t) if swap else t

    for a, b in _GLOBAL.items():
        move(a, b)
    move("final_layer.adaLN_modulation.1", "norm_out.linear", swap=True)
    for n in block_indices(sd, "transformer_blocks"):
        pre_only = f"transformer_blocks.{n}.attn.to_add_out.weight" not in sd
        for a, b, _ in _pairs(n):
            move(a, b, swap=pre_only and b.endswith("norm1_context.linear"))
        for a, b in _NORMS.items():
            if f"transformer_blocks.{n}.{b}" in sd:
                out[f"joint_blocks.{n}.{a}"] = sd[f"transformer_blocks.{n}.{b}"]
        for a, parts in _QKV.items():
            for end in ("weight", "bias"):
                names = [f"transformer_blocks.{n}.{d}.{end}" for d in parts]
                if names[0] in sd:
                    out[f"joint_blocks.{n}.{a}.{end}"] = torch.cat([sd[k] for k in names], dim=0)
    return {k: v.contiguous() for k, v in out.items()}
