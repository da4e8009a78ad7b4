"""Tiny SD2.x checkpoints in the ldm single-file layout of Stability's releases: the SD2 UNet's block structure
(four levels, two resnets each, attention on the first three, linear proj_in/proj_out), the OpenCLIP text
tower under `cond_stage_model.model.` and the VAE under `first_stage_model.`, with tiny widths.

Two files, as SD2 ships two kinds: 512-base (eps) and 768-v (v-prediction). An SD2 file does not say which it
is; ComfyUI decides by the spread of one late LayerNorm bias (std > 0.09 means v), so the v file carries such
a bias and the base file keeps the LayerNorm's initial zeros."""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import UNet2DConditionModel

from . import clip as clip_mod
from . import unet as unet_mod
from . import vae as vae_mod
from .demo import SEED, _clip, _prefixed, _unet_ldm, _vae, save_tiny, tiny_unet

V_MARKER = unet_mod.SD2_V_MARKER
TEXT_WIDTH = 32


def sd2_unet(arch: str, channels: tuple[int, ...], context: int, **config) -> UNet2DConditionModel:
    """A tiny UNet with SD2's block structure (four levels of `channels`, two resnets each, attention on the first
    three, linear projections) for `context`-wide text states; `config` adds to it."""
    return tiny_unet(
        arch,
        channels,
        layers_per_block=2,
        down_block_types=("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",),
        up_block_types=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3,
        cross_attention_dim=context,
        use_linear_projection=True,
        **config,
    )


def sd2_checkpoint(v_prediction: bool) -> dict[str, torch.Tensor]:
    """The tensors of a tiny SD2 checkpoint (seeded; the two kinds share every weight but the marker bias)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED + 10)
        unet, vae, te = sd2_unet("sd2", (16, 32, 64, 64), TEXT_WIDTH), _vae(), _clip(TEXT_WIDTH, True, "gelu")
        ldm = _unet_ldm(unet)
        if v_prediction:
            gen = torch.Generator().manual_seed(SEED + 11)
            ldm[V_MARKER] = torch.randn(ldm[V_MARKER].shape, generator=gen) * 0.2
        return {
            **_prefixed(ldm, unet_mod.LDM_UNET_PREFIX),
            **_prefixed(vae_mod.diffusers_to_ldm(vae.state_dict()), vae_mod.LDM_VAE_PREFIX),
            **_prefixed(clip_mod.hf_to_open_clip(te.state_dict()), "cond_stage_model.model."),
        }


def build_demo_sd2(models_dir: Path) -> list[Path]:
    """sd2-tiny-base.safetensors (eps, as 512-base) and sd2-tiny-v.safetensors (v, as 768-v) in checkpoints/."""
    out = Path(models_dir) / "checkpoints"
    return [
        save_tiny(sd2_checkpoint(False), out / "sd2-tiny-base.safetensors"),
        save_tiny(sd2_checkpoint(True), out / "sd2-tiny-v.safetensors"),
    ]
