"""chroma-radiance-tiny: a deterministic tiny Chroma Radiance written in the layout of the published files (ComfyUI's
names: `img_in_patch`, Chroma's blocks and approximator, `nerf_image_embedder.embedder.0`, `nerf_blocks.N.
param_generator`, `nerf_final_layer_conv`) as diffusion_models/chroma_radiance_tiny.safetensors: chroma-tiny's
transformer sizes on 16x16 pixel patches, a NeRF head 8 wide with 4 DCT frequencies, mlp ratio 2 and 2 blocks, and
the conv final layer of chroma-radiance-x0. Its metadata names the flux-tiny config (RoPE axes); the text encoder is
flux-tiny's T5 and the VAE ComfyUI's file-less pixel_space. Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch

from nodes.models.chroma_demo import CONFIG as CHROMA_CONFIG
from nodes.models.chroma_demo import comfy_names, require_round_trip, write_flux_tiny_config_file
from nodes.models.chroma_radiance import PATCH, RadianceNetwork, split_state_dict
from nodes.models.flux_demo import randomize_constants

SEED = 13
FILE = "diffusion_models/chroma_radiance_tiny.safetensors"
TRUNK = {**CHROMA_CONFIG, "in_channels": 3 * PATCH * PATCH, "out_channels": 3}
HEAD = {"channels": 3, "width": 8, "freqs": 4, "ratio": 2, "depth": 2, "final": "conv"}


def tiny_radiance_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    network = RadianceNetwork(TRUNK, HEAD)
    randomize_constants(network, torch.Generator().manual_seed(seed + 1))
    module_sd = network.state_dict()
    trunk = {k[len("transformer.") :]: v for k, v in module_sd.items() if k.startswith("transformer.")}
    patch_w, patch_b = trunk.pop("x_embedder.weight"), trunk.pop("x_embedder.bias")
    sd = comfy_names(trunk)
    sd["img_in_patch.weight"] = patch_w.reshape(patch_w.shape[0], 3, PATCH, PATCH).contiguous()
    sd["img_in_patch.bias"] = patch_b.contiguous()
    sd.update({k: v.contiguous() for k, v in module_sd.items() if not k.startswith("transformer.")})
    back_trunk, back_head = split_state_dict(sd)
    back = {**{"transformer." + k: v for k, v in back_trunk.items()}, **back_head}
    require_round_trip(back, module_sd, "Chroma Radiance")
    return sd


def build_demo_chroma_radiance(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write chroma-radiance-tiny under a ComfyUI models folder; returns the paths written."""
    return write_flux_tiny_config_file(models_dir, FILE, tiny_radiance_state_dict, seed)
