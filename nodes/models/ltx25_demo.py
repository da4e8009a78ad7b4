"""ltx2.5-tiny VAE: a deterministic tiny vae/ltx-2.5-video-vae-bf16.safetensors in the published layout
(nodes/models/ltx25_vae.py): LTX-2's convolutional encoder in the original (Lightricks) names with LTX-2.5's block
kinds (one res block per stage, ComfyUI's fixed 128 base and latent channels, no channel growth), the diffusion
decoder at small widths (128/64/32/32/16 channels, heads of 16, one block per stage, two diffusion blocks, the
published kernels' shapes shrunk), the checkpoint-only `decoder.type_emb`, the per-channel statistics, and the
sizes in the metadata `config` JSON's "vae" section as ComfyUI reads it. bfloat16 like the released file. Same seed
-> byte-identical file."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.ltx2_demo import vae_key_name
from nodes.models.ltx25_vae import DiffusionVAEModule, decoder_kwargs, encoder_kwargs
from nodes.output_claims import write_atomic

SEED = 25
VAE_FILE = "vae/ltx-2.5-video-vae_tiny.safetensors"
ENCODER = {
    "dims": 3,
    "in_channels": 3,
    "out_channels": 128,
    "blocks": [
        ["res_x", {"num_layers": 1}],
        ["compress_space_res", {"multiplier": 1}],
        ["res_x", {"num_layers": 1}],
        ["compress_time_res", {"multiplier": 1}],
        ["res_x", {"num_layers": 1}],
        ["compress_all_res", {"multiplier": 1}],
        ["res_x", {"num_layers": 1}],
        ["compress_all_res", {"multiplier": 1}],
        ["res_x", {"num_layers": 1}],
    ],
    "patch_size": 4,
    "latent_log_var": "constant",
    "norm_layer": "pixel_norm",
    "base_channels": 128,
    "spatial_padding_mode": "zeros",
}
DECODER = {
    "in_channels": 128,
    "out_channels": 3,
    "patch_size": 4,
    "head_dim": 16,
    "stage_channels": [128, 64, 32, 32, 16],
    "stage_depths": [1, 1, 1, 1, 2],
    "stage_kernels": [[3, 3, 3], [3, 3, 3], [3, 3, 3], [3, 3, 3], [5, 5, 5]],
    "upsamples": [[[1, 2, 2], 2], [[2, 1, 1], 2], [[2, 2, 2], 1], [[2, 2, 2], 2]],
    "stage5_kernel": [5, 5, 5],
    "t_emb_dim": 32,
    "timestep_scale_multiplier": 1000.0,
    "default_num_inference_steps": 1,
}
CONFIG = {
    "vae": {
        "_class_name": "CausalDiffusionVAE",
        "dims": 3,
        "model_output_type": "x0",
        "encoder": ENCODER,
        "decoder": DECODER,
    }
}


def tiny_vae_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    """The tiny file's tensors in the published names, bfloat16."""
    with torch.random.fork_rng(devices=[]):
        gen = torch.Generator().manual_seed(seed)
        module = DiffusionVAEModule(encoder_kwargs(ENCODER), decoder_kwargs(DECODER), ENCODER["out_channels"])
        sd = {}
        for name, value in sorted(module.state_dict().items()):
            noise = torch.randn(value.shape, generator=gen)
            if name == "latents_std":
                sd[name] = torch.rand(value.shape, generator=gen) + 0.5
            elif name == "latents_mean":
                sd[name] = 0.1 * noise
            elif name.startswith("decoder.") and "norm" in name:
                sd[name] = 1 + 0.1 * noise
            else:  # small weights: the stacked convolutions and blocks stay in range
                sd[name] = 0.05 * noise
    out = {}
    for name, value in sd.items():
        if name.startswith("decoder."):
            out[name] = value
        else:  # the encoder and statistics in LTX-2's original names, without the checkpoint's `vae.`
            out[vae_key_name(name)[len("vae.") :]] = value
    for name in ("mean-of-stds", "mean-of-stds_over_std-of-means", "channel"):  # in the file, read by nobody
        out[f"per_channel_statistics.{name}"] = torch.rand(128, generator=gen) + 0.5
    out["decoder.type_emb"] = torch.randn(128, generator=gen)
    return {k: v.to(torch.bfloat16).contiguous() for k, v in out.items()}


def build_demo_ltx25(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write the tiny LTX-2.5 video VAE under a ComfyUI models folder; returns the paths written."""
    path = Path(models_dir) / VAE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    sd = tiny_vae_state_dict(seed)
    meta = {"config": json.dumps(CONFIG)}
    write_atomic(path, lambda tmp: save_file(sd, tmp, metadata=meta))
    return [path]
