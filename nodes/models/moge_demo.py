"""A tiny stand-in for MoGe-2's files (Ruicheng/moge-2-vitl-normal; ComfyUI's moge_2_vitl_normal_fp16 under
models/geometry_estimation): MoGe's own key layout (Meta's DINOv2 names under encoder.backbone., the four output
projections, the encoder's image_mean / image_std buffers, a five-level neck, points / mask / normal heads and the
metric-scale MLP), float16 as published, at tiny widths: a 64-wide, 4-block ViT (one 64-wide head, as ViT-L's are)
with its 37x37 position table, necks of 8-16 channels. Byte-deterministic (seeded draws, no metadata)."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from .moge import MoGe2, StackConfig

FILE = "geometry_estimation/moge_2_vitl_normal_tiny.safetensors"
SEED = 2605
DIM, DEPTH, GRID, PROJ = 64, 4, 37, 16  # DINOv2-L14's 37x37 position table (518 px), as ComfyUI builds it
NECK = StackConfig((PROJ + 2, 2, 2, 2, 2), (16, 16, 8, 8, 8), (None,) * 5, (1,) * 5, (True,) * 4, True)


def _head(out: int) -> StackConfig:
    # the heads read the neck's five levels; bilinear resamplers here (the neck's are transposed convolutions)
    return StackConfig((16, 16, 8, 8, 8), (8, 8, 8, 8, 8), (None,) * 4 + (out,), (1,) * 5, (False,) * 4, True)


def tiny_moge2_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    stacks = {"neck": NECK, "points_head": _head(3), "mask_head": _head(1), "normal_head": _head(3)}
    model = MoGe2(DIM, DEPTH, GRID, False, PROJ, stacks, [DIM, 32, 1])
    gen = torch.Generator().manual_seed(seed)
    sd = {}
    for key, value in model.state_dict().items():
        if key.startswith("encoder.image_"):
            sd[key] = value.clone()  # ImageNet's mean and std, as MoGe stores them
        elif value.ndim <= 1 and ("norm" in key or key.endswith("gamma")) and key.endswith(("weight", "gamma")):
            sd[key] = 1.0 + 0.1 * torch.randn(value.shape, generator=gen)
        else:
            fan_in = value[0].numel() if value.ndim > 1 else 1
            sd[key] = torch.randn(value.shape, generator=gen) * (0.5 / fan_in**0.5 if value.ndim > 1 else 0.05)
    # a depth head near log-depth 0.7 keeps the focal fit well posed; the mask bias leaves part of the image masked
    sd["points_head.output_blocks.4.bias"] = torch.tensor([0.0, 0.0, 0.7])
    sd["mask_head.output_blocks.4.bias"] = torch.tensor([-0.05])
    return {k: v.to(torch.float16).contiguous() for k, v in sorted(sd.items())}


def build_demo_moge(models_dir: Path) -> list[Path]:
    path = Path(models_dir) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tiny_moge2_state_dict(), str(path))
    return [path]
