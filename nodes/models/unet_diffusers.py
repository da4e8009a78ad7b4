"""Single-file UNets stored under diffusers' UNet2DConditionModel names (Lotus-D's published file is one: ComfyUI's
model_detection lists LotusD among the diffusers UNet configs and its utils.unet_to_diffusers maps
class_embedding.* to label_emb.*). Their ldm layout is read from the diffusers key shapes and the tensors renamed to
ldm, so that they load, patch and save through the same path as ldm files."""

from __future__ import annotations

from typing import Any

from .unet import Shapes, UNetLayout, _count, block_map, diffusers_to_ldm


def label_module(shapes: Shapes) -> str:
    """The diffusers name of ldm's label_emb in this file: Lotus' class embedding or SDXL's added embedding."""
    return "class_embedding" if "class_embedding.linear_1.weight" in shapes else "add_embedding"


def _depths(shapes: Shapes, block: str) -> list[int]:
    return [
        _count(shapes, f"{block}.attentions.{j}.transformer_blocks.")
        for j in range(_count(shapes, f"{block}.resnets."))
    ]


def diffusers_layout(shapes: Shapes) -> UNetLayout:
    """The UNetLayout (ldm terms) of a diffusers-named UNet, from its key shapes."""
    n = _count(shapes, "down_blocks.")
    attn = next((k for k in shapes if k.endswith("transformer_blocks.0.attn2.to_k.weight")), None)
    proj = next((k for k in shapes if k.endswith(".proj_in.weight")), None)
    label = shapes.get(f"{label_module(shapes)}.linear_1.weight")
    mid = "mid_block.resnets.0.conv1.weight" in shapes
    return UNetLayout(
        in_channels=shapes["conv_in.weight"][1],
        out_channels=shapes["conv_out.weight"][0],
        time_embed_dim=shapes["time_embedding.linear_1.weight"][0],
        channels=[shapes[f"down_blocks.{i}.resnets.0.conv1.weight"][0] for i in range(n)],
        down_depths=[_depths(shapes, f"down_blocks.{i}") for i in range(n)],
        up_depths=[_depths(shapes, f"up_blocks.{n - 1 - level}") for level in range(n)],
        mid_depth=_count(shapes, "mid_block.attentions.0.transformer_blocks.") if mid else None,
        context_dim=shapes[attn][1] if attn else None,
        use_linear=proj is not None and len(shapes[proj]) == 2,
        adm_in=label[1] if label else None,
    )


def to_ldm(sd: dict[str, Any]) -> dict[str, Any]:
    """A diffusers-named UNet state dict under ldm's names (values passed through)."""
    shapes = {k: tuple(v.shape) for k, v in sd.items()}
    layout = diffusers_layout(shapes)
    return diffusers_to_ldm(sd, layout, block_map(layout, label_module(shapes)))
