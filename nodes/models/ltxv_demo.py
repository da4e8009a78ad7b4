"""ltxv-tiny: a tiny LTX-Video 0.9 checkpoint in the released layout (ltx-video-2b-v0.9*.safetensors): the
transformer under `model.diffusion_model.` in the original Lightricks names (patchify_proj, adaln_single,
q_norm / k_norm, caption_projection, scale_shift_table, proj_out), the video VAE under `vae.` with its latent
statistics, and the sizes in the metadata `config` JSON, whose "transformer" section ComfyUI 0.3.64's
model_detection lays over its own measurements and whose "vae" section gives the VAE's block lists (as the
0.9.1+ files carry them). The transformer is diffusers' LTXVideoTransformer3DModel at 2 heads of 8, 2 blocks,
reading 32-wide text states (flux-tiny-t5's width); the VAE is LTX-2 demo's tiny block list (ltx2_demo.VAE_CONFIG:
the 0.9.5-style compressions with one layer per stage, no timestep conditioning), which ComfyUI 0.3.64's
CausalVideoAutoencoder builds from the same config."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from diffusers import AutoencoderKLLTX2Video, LTXVideoTransformer3DModel
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.ltx2_demo import VAE_CONFIG, vae_to_original
from nodes.models.ltx2_vae import diffusers_config as vae_diffusers_config
from nodes.models.ltxv import diffusers_config
from nodes.output_claims import write_atomic

SEED = 29
PREFIX = "model.diffusion_model."
CHECKPOINT = "checkpoints/ltx-video-2b-v0.9_tiny.safetensors"
# ComfyUI's LTXVModel argument names; the widths are tiny, the rest LTX-Video 0.9's.
TRANSFORMER_CONFIG = {
    "num_attention_heads": 2,
    "attention_head_dim": 8,
    "cross_attention_dim": 16,
    "caption_channels": 32,
}
NUM_LAYERS = 2
# diffusers' names -> the released ones (the inverse of diffusers' convert_ltx_transformer_checkpoint_to_diffusers)
_RENAMES = (("proj_in", "patchify_proj"), ("time_embed", "adaln_single"), ("norm_q", "q_norm"), ("norm_k", "k_norm"))


def transformer_to_original(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in sd.items():
        for ours, theirs in _RENAMES:
            key = key.replace(ours, theirs)
        out[PREFIX + key] = value
    return out


def tiny_ltxv_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    """The tiny checkpoint's tensors in the released layout, bfloat16."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        shapes = {"patchify_proj.weight": torch.empty(0, 128)}
        config = {**TRANSFORMER_CONFIG, "num_layers": NUM_LAYERS, "positional_embedding_theta": 10000.0}
        config["positional_embedding_max_pos"] = [20, 2048, 2048]
        model = LTXVideoTransformer3DModel(**diffusers_config(config, shapes))
        randomize_constants(model, gen)
        sd = transformer_to_original(model.state_dict())
        vae = AutoencoderKLLTX2Video(**vae_diffusers_config(VAE_CONFIG))
        with torch.no_grad():
            for p in vae.parameters():  # small weights: the stacked convolutions stay in range
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))
            vae.latents_mean.copy_(0.1 * torch.randn(128, generator=gen))
            vae.latents_std.copy_(torch.rand(128, generator=gen) + 0.5)
        sd.update(vae_to_original(vae.state_dict(), gen))
    return {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()}


def metadata() -> dict[str, str]:
    """One metadata entry (several would be written in a per-process random order, changing the file's hash)."""
    return {"config": json.dumps({"transformer": TRANSFORMER_CONFIG, "vae": VAE_CONFIG})}


def build_demo_ltxv(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write ltxv-tiny under a ComfyUI models folder; returns the paths written."""
    path = Path(models_dir) / CHECKPOINT
    path.parent.mkdir(parents=True, exist_ok=True)
    sd = tiny_ltxv_state_dict(seed)
    write_atomic(path, lambda tmp: save_file(sd, tmp, metadata=metadata()))
    return [path]
