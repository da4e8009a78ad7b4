"""A tiny Stable Video Diffusion checkpoint in the layout Stability ships (svd.safetensors / svd_xt.safetensors), for
`demo-models`: checkpoints/svd_xt-tiny.safetensors holds

- the VideoUNet under `model.diffusion_model.` (ldm names): 64 and 128 channels with SVD's 64-wide heads, one
  ResBlock per level, attention on the first level and in the middle, temporal ResBlocks and transformers, SVD's
  768-wide ADM (three 256-wide embeddings) and 8 input channels (the latent and the image latent);
- the VAE under `first_stage_model.`: an SD encoder and the temporal decoder, 4 levels (8x) of two ResBlocks (three
  in the decoder), 4 latent channels;
- the CLIP image encoder under `conditioner.embedders.0.open_clip.model.visual.` (OpenCLIP's names): a two-layer
  tower whose 64-wide image embedding is the UNet's context (ViT-H's 1024 in SVD).

Every tensor is drawn from fixed seeds and stored as demo-models stores them (ComfyUI and this project compute in
float32 on a CPU)."""

from __future__ import annotations

from pathlib import Path

import torch

from . import vae as vae_mod
from .demo import SEED, _prefixed, save_tiny, tiny_clip_vision
from .svd import CLIP_VISION_PREFIX, RESNET_RENAMES, UNET_PREFIX, VAE_PREFIX, split_block
from .unclip_demo import open_clip_visual
from .unet import UNetLayout, block_map

FILE = "svd_xt-tiny.safetensors"
CHANNELS = (64, 128)
IMAGE_EMBED = 64  # the CLIP image embedding, the UNet's context width
_RESNET_BACK = {v: k for k, v in RESNET_RENAMES.items()}


def _layout() -> UNetLayout:
    return UNetLayout(
        in_channels=8,
        out_channels=4,
        time_embed_dim=4 * CHANNELS[0],
        channels=list(CHANNELS),
        down_depths=[[1], [0]],
        up_depths=[[1, 1], [0, 0]],
        mid_depth=1,
        context_dim=IMAGE_EMBED,
        use_linear=True,
        adm_in=768,
    )


def _unet_rest(rest: str, resnet: bool) -> str:
    """The inverse of svd._resnet_key / svd._transformer_key."""
    if resnet:
        if rest.startswith("time_mixer."):
            return rest
        half, _, rest = rest.partition(".")
        head, _, tail = rest.rpartition(".")
        name = f"{_RESNET_BACK.get(head, head)}.{tail}"
        return name if half == "spatial_res_block" else "time_stack." + name
    if rest.startswith("temporal_transformer_blocks."):
        return "time_stack." + rest[len("temporal_transformer_blocks.") :]
    if rest.startswith("time_pos_embed.linear_"):
        index, _, tail = rest[len("time_pos_embed.linear_") :].partition(".")
        return f"time_pos_embed.{0 if index == '1' else 2}.{tail}"
    return rest


def unet_ldm() -> dict[str, torch.Tensor]:
    from diffusers import UNetSpatioTemporalConditionModel

    from .svd import unet_config

    module = UNetSpatioTemporalConditionModel(**unet_config(_layout(), None))
    inverse = {d: (ldm, resnet) for ldm, (d, resnet) in block_map(_layout()).items()}
    out = {}
    for key, v in module.state_dict().items():
        prefix, rest = split_block(key, inverse) or (None, None)
        if prefix is None:
            raise KeyError(f"no ldm name for SVD UNet key {key}")
        ldm, resnet = inverse[prefix]
        out[ldm + _unet_rest(rest, resnet)] = v
    return out


def vae_ldm() -> dict[str, torch.Tensor]:
    from diffusers import AutoencoderKLTemporalDecoder

    channels = (32, 64, 64, 64)
    module = AutoencoderKLTemporalDecoder(
        down_block_types=("DownEncoderBlock2D",) * len(channels),
        block_out_channels=channels,
        layers_per_block=2,  # diffusers' temporal mid block has SVD's two ResBlocks only at two a level
        latent_channels=4,
    )
    plain = {}
    for key, v in module.state_dict().items():
        if key.startswith("quant_conv."):
            continue  # ComfyUI's AutoencodingEngine has none (svd.load_vae restores the identity)
        if key.startswith("decoder.time_conv_out."):
            key = "decoder.conv_out.time_mix_conv." + key.rsplit(".", 1)[1]
        elif key.startswith("decoder.") and ".resnets." in key:
            head, _, rest = key.partition(".resnets.")
            index, _, rest = rest.partition(".")
            if rest.startswith("time_mixer."):
                rest = "mix_factor"
            elif rest.startswith("temporal_res_block."):
                name, _, tail = rest[len("temporal_res_block.") :].rpartition(".")
                rest = f"time_stack.{_RESNET_BACK.get(name, name)}.{tail}"
            else:
                rest = rest[len("spatial_res_block.") :]
            key = f"{head}.resnets.{index}.{rest}"
        plain[key] = v
    return vae_mod.diffusers_to_ldm(plain)


def svd_checkpoint() -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED + 90)
        unet, vae = unet_ldm(), vae_ldm()
        vision = open_clip_visual(tiny_clip_vision(IMAGE_EMBED, SEED + 91).state_dict())
        return {
            **_prefixed(unet, UNET_PREFIX),
            **_prefixed(vae, VAE_PREFIX),
            **_prefixed(vision, CLIP_VISION_PREFIX),
        }


def build_demo_svd(models_dir: Path) -> list[Path]:
    return [save_tiny(svd_checkpoint(), Path(models_dir) / "checkpoints" / FILE)]
