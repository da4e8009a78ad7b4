"""Tiny Qwen-Image InstantX ControlNets for qwen-image-tiny, in the published layout (diffusers'
QwenImageControlNetModel, as Comfy-Org/Qwen-Image-InstantX-ControlNets ships InstantX's Union and Inpainting files):
the tiny transformer's widths (one 128-wide head, 32-wide text states), two blocks (the released files have five),
the Inpainting one with the mask's 4 extra hint features; and a tiny Fun ControlNet Union (alibaba-pai's
Qwen-Image-2512 layout: 132 hint features, five control blocks at the tiny widths). bfloat16 like the released
files; same seed -> same bytes."""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import QwenImageControlNetModel
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.qwen_image_controlnet import MASK_FEATURES
from nodes.models.qwen_image_demo import TEXT_WIDTH
from nodes.models.qwen_image_fun_controlnet import HINT_CHANNELS, FunControlNetModel
from nodes.models.qwen_image_text import HEAD_DIM
from nodes.output_claims import write_atomic

SEED = 11
FILES = {
    "union": ("controlnet/qwen_image_instantx_union_tiny.safetensors", 0),
    "inpainting": ("controlnet/qwen_image_instantx_inpainting_tiny.safetensors", MASK_FEATURES),
}
FUN_FILE = "controlnet/qwen_image_2512_fun_controlnet_union_tiny.safetensors"
FUN_SEED_OFFSET = 100  # its own stream: the InstantX files keep their bytes


def tiny_controlnet_state_dict(extra_channels: int, seed: int = SEED) -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + extra_channels)
        net = QwenImageControlNetModel(
            patch_size=2,
            in_channels=64,
            out_channels=16,
            num_layers=2,
            attention_head_dim=HEAD_DIM,
            num_attention_heads=1,
            joint_attention_dim=TEXT_WIDTH,
            extra_condition_channels=extra_channels,
        )
        # the zero-initialised controlnet_blocks and hint embedder would add nothing: random values instead
        randomize_constants(net, torch.Generator().manual_seed(seed + extra_channels))
    return {k: v.to(torch.bfloat16).contiguous() for k, v in net.state_dict().items()}


def tiny_fun_controlnet_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + FUN_SEED_OFFSET)
        net = FunControlNetModel(in_features=HINT_CHANNELS * 4, inner=HEAD_DIM, heads=1, head_dim=HEAD_DIM)
        randomize_constants(net, torch.Generator().manual_seed(seed + FUN_SEED_OFFSET))
    return {k: v.to(torch.bfloat16).contiguous() for k, v in net.state_dict().items()}


def build_demo_qwen_image_controlnets(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write the two tiny ControlNets under a ComfyUI models folder; returns the paths written."""
    written = []
    for rel, extra in FILES.values():
        path = Path(models_dir) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        sd = tiny_controlnet_state_dict(extra, seed)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp, metadata={"format": "pt"}))
        written.append(path)
    path = Path(models_dir) / FUN_FILE
    sd = tiny_fun_controlnet_state_dict(seed)
    write_atomic(path, lambda tmp: save_file(sd, tmp, metadata={"format": "pt"}))
    written.append(path)
    return written
