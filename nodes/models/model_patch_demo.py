"""Tiny DiffSynth ControlNets for qwen-image-tiny (nodes.models.qwen_image_demo), in the layout of
Comfy-Org/Qwen-Image-DiffSynth-ControlNets' model_patches files and bfloat16 like them: width 128 and two
control blocks, one per block of the tiny transformer.
- model_patches/qwen_image_diffsynth_tiny.safetensors: the canny/depth layout (img_in takes 64 features);
- model_patches/qwen_image_inpaint_diffsynth_tiny.safetensors: the inpaint layout (68: one mask channel).
And a tiny Z-Image-Turbo Fun ControlNet Union for z-image-turbo-tiny (nodes.models.zimage_demo), in the first
release's layout (alibaba-pai/Z-Image-Turbo-Fun-Controlnet-Union.safetensors: six control layers, two refiner
blocks, the 64-feature embedder), 256 wide with 128-wide heads and feed-forwards of 768 like the tiny model:
- model_patches/z_image_turbo_fun_controlnet_union_tiny.safetensors.
Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.model_patch import BlockWiseControlNet
from nodes.models.zimage_fun_control import ZImageFunControl, from_module_names
from nodes.output_claims import write_atomic

SEED = 11
WIDTH = 128  # qwen-image-tiny's transformer width
BLOCKS = 2  # and its block count
FILES = {
    "model_patches/qwen_image_diffsynth_tiny.safetensors": 64,
    "model_patches/qwen_image_inpaint_diffsynth_tiny.safetensors": 68,
}

ZIMAGE_FUN = "model_patches/z_image_turbo_fun_controlnet_union_tiny.safetensors"
ZIMAGE_FUN_SIZES = {"dim": 256, "ffn": 768, "in_features": 64, "layers": 6, "refiners": 2}


def tiny_zimage_fun_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 500)
        net = ZImageFunControl(**ZIMAGE_FUN_SIZES)
        randomize_constants(net, torch.Generator().manual_seed(seed + 500))
    return {k: v.to(torch.bfloat16).contiguous() for k, v in from_module_names(net.state_dict()).items()}


def tiny_diffsynth_state_dict(in_dim: int, seed: int = SEED) -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + in_dim)
        gen = torch.Generator().manual_seed(seed + in_dim)
        net = BlockWiseControlNet(in_dim, WIDTH, BLOCKS)
        randomize_constants(net, gen)  # norm scales of one, zero biases: a key mix-up would not show
    return {k: v.to(torch.bfloat16).contiguous() for k, v in net.state_dict().items()}


def build_demo_model_patches(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write the tiny DiffSynth ControlNets under a ComfyUI models folder; returns the paths written."""
    written = []
    for name, in_dim in FILES.items():
        path = Path(models_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        sd = tiny_diffsynth_state_dict(in_dim, seed)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp, metadata={"format": "pt"}))
        written.append(path)
    path = Path(models_dir) / ZIMAGE_FUN
    sd = tiny_zimage_fun_state_dict(seed)
    write_atomic(path, lambda tmp: save_file(sd, tmp, metadata={"format": "pt"}))
    return [*written, path]
