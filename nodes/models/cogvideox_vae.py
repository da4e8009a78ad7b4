"""CogVideoX's VAE (vae/cogvideox_vae.safetensors): 16-channel latents, 8x in space, 4x in time (4(T-1)+1 frames from
an odd latent frame count, 4T from an even one, as the time upsampling keeps a lone first frame only for odd counts).

The file is diffusers' AutoencoderKLCogVideoX state dict as released (ComfyUI loads it under the same names; its
comfy/sd.py rule: `decoder.conv_in.conv.weight` with `decoder.mid_block.resnets.0.norm1.norm_layer.weight`), so the
modules are diffusers' CogVideoXEncoder3D / CogVideoXDecoder3D. ComfyUI fixes the released sizes; here the widths, the
blocks' depth and the latent channels are read from the tensors (GroupNorm in 32 groups, 4x time as released).

What is ComfyUI's own (comfy/ldm/cogvideo/vae.py of the newest ComfyUI, comfyanonymous/ComfyUI 349c5aa265) is how the
frames are cut, which changes the numbers since every GroupNorm sees only its chunk, and so is done here as there:
- encode: the T mod 8 leading frames first (the only chunk that may have an odd count), then chunks of 8, the causal
  convolutions carrying their last frames from chunk to chunk; the latent is the posterior's mean;
- decode: conv_in, the mid block and the time-upsampling up blocks on the whole latent, then the remaining up blocks,
  the spatial norm and conv_out on chunks of 4 frames (the latent, stretched in time once as the spatial norm
  stretches it, first frame apart for odd counts, then resized in space per chunk), caches carried between chunks.
ComfyUI's single-frame shortcut (the temporal kernel summed) is the same convolution as padding with copies of the
frame, up to float rounding. Pixels go in as 2x - 1 and come out clamped (x + 1) / 2, as ComfyUI's VAE wrapper does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

from cluster.refs import ModelRef
from nodes.models.components import VAEModel
from nodes.models.errors import ModelLoadError
from nodes.models.safetensors_io import build_module

MARKERS = ("decoder.conv_in.conv.weight", "decoder.mid_block.resnets.0.norm1.norm_layer.weight")
SPATIAL = 8
TEMPORAL = 4
ENCODE_FRAMES = 8  # ComfyUI's num_sample_frames_batch_size
DECODE_FRAMES = 4  # ComfyUI's rolling decode's chunk of pixel frames


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict:
    """diffusers' AutoencoderKLCogVideoX config from the tensors."""
    blocks = 1 + max(int(k.split(".")[2]) for k in sd if k.startswith("encoder.down_blocks."))
    widths = tuple(sd[f"encoder.down_blocks.{i}.resnets.0.conv2.conv.weight"].shape[0] for i in range(blocks))
    layers = 1 + max(int(k.split(".")[4]) for k in sd if k.startswith("encoder.down_blocks.0.resnets."))
    return {
        "block_out_channels": widths,
        "down_block_types": ("CogVideoXDownBlock3D",) * blocks,
        "up_block_types": ("CogVideoXUpBlock3D",) * blocks,
        "layers_per_block": layers,
        "latent_channels": sd["encoder.conv_out.conv.weight"].shape[0] // 2,
        "temporal_compression_ratio": TEMPORAL,
    }


def _stretch(z: torch.Tensor, size: tuple[int, int, int]) -> torch.Tensor:
    """The latent resized (nearest) to `size`, an odd frame count keeping the first frame apart (the spatial norm's
    rule)."""
    if size[0] > 1 and size[0] % 2 == 1:
        first = F.interpolate(z[:, :, :1], size=(1, *size[1:]))
        rest = F.interpolate(z[:, :, 1:], size=(size[0] - 1, *size[1:]))
        return torch.cat([first, rest], dim=2)
    return F.interpolate(z, size=size)


@torch.no_grad()
def encode_chunks(encoder: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """[B,3,T,H,W] in -1..1 -> the posterior's mean, chunked in time as ComfyUI's encode."""
    t = x.shape[2]
    lead = t % ENCODE_FRAMES
    starts = ([0] if lead else []) + list(range(lead, t, ENCODE_FRAMES))
    ends = starts[1:] + [t]
    cache, parts = None, []
    for start, end in zip(starts, ends):
        part, cache = encoder(x[:, :, start:end], conv_cache=cache)
        parts.append(part)
    return torch.cat(parts, dim=2).chunk(2, dim=1)[0]


@torch.no_grad()
def decode_rolling(decoder: nn.Module, z: torch.Tensor) -> torch.Tensor:
    """[B,C,T,h,w] -> [B,3,4(T-1)+1,8h,8w] in -1..1 (before the clamp), as ComfyUI's rolling decode."""
    split = int(math.log2(TEMPORAL))  # the up blocks that upsample in time run on the whole tensor
    x, _ = decoder.conv_in(z)
    x, _ = decoder.mid_block(x, None, z)
    for block in decoder.up_blocks[:split]:
        x, _ = block(x, None, z)
    rest = list(decoder.up_blocks[split:])
    frames = x.shape[2]
    if frames <= DECODE_FRAMES or not rest:
        for block in rest:
            x, _ = block(x, None, z)
        x, _ = decoder.norm_out(x, z)
        x, _ = decoder.conv_out(decoder.conv_act(x))
        return x
    z_time = _stretch(z, (frames, z.shape[3], z.shape[4]))
    caches: dict[str, dict] = {}
    out = []
    for start in range(0, frames, DECODE_FRAMES):
        chunk = x[:, :, start : start + DECODE_FRAMES]
        zc = z_time[:, :, start : start + DECODE_FRAMES]

        def at(size: tuple[int, int], zc: torch.Tensor = zc) -> torch.Tensor:
            return zc if zc.shape[3:] == size else F.interpolate(zc, size=(zc.shape[2], *size))

        for i, block in enumerate(rest):
            chunk, caches[f"up{i}"] = block(chunk, None, at(chunk.shape[3:]), conv_cache=caches.get(f"up{i}"))
        chunk, caches["norm_out"] = decoder.norm_out(chunk, at(chunk.shape[3:]), conv_cache=caches.get("norm_out"))
        chunk, caches["conv_out"] = decoder.conv_out(decoder.conv_act(chunk), conv_cache=caches.get("conv_out"))
        out.append(chunk)
    return torch.cat(out, dim=2)


class CogVideoXVAE(VAEModel):
    temporal_compression = TEMPORAL

    @torch.no_grad()
    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        """IMAGE [T,H,W,3] (one video) -> the latent [1,16,1+(T-1)//4,H/8,W/8], the sides centre-cropped to 8."""
        h, w = pixels.shape[1] // SPATIAL * SPATIAL, pixels.shape[2] // SPATIAL * SPATIAL
        if h == 0 or w == 0:
            raise ValueError(f"the CogVideoX VAE needs sides of at least {SPATIAL}, got {tuple(pixels.shape)}")
        top, left = (pixels.shape[1] % SPATIAL) // 2, (pixels.shape[2] % SPATIAL) // 2
        pixels = pixels[:, top : top + h, left : left + w, :3]
        x = pixels.movedim(-1, 0)[None].to(torch.float32) * 2.0 - 1.0
        return encode_chunks(self.module.encoder, x).float()

    encode_video = encode

    @staticmethod
    def decoded_size(dim: int, size: int) -> int:
        """Frames (dim 0) or pixels (1, 2) of a latent extent, as ComfyUI's upscale_ratio counts them for tiled
        decoding: 4(T-1)+1 in time (an even count really decodes to 4T frames), x8 in space."""
        return max(0, size * TEMPORAL - (TEMPORAL - 1)) if dim == 0 else size * SPATIAL

    @staticmethod
    def decoded_position(dim: int, index: int) -> int:
        return index * (TEMPORAL if dim == 0 else SPATIAL)

    @torch.no_grad()
    def decode_raw(self, latent: torch.Tensor) -> torch.Tensor:
        if latent.dim() != 5 or latent.shape[1] != self.latent_channels:
            raise ValueError(
                f"the CogVideoX VAE takes [B,{self.latent_channels},T,H,W] video latents, got {tuple(latent.shape)}"
            )
        return torch.cat([decode_rolling(self.module.decoder, latent[i : i + 1].float()) for i in range(len(latent))])

    @staticmethod
    def to_image(x: torch.Tensor) -> torch.Tensor:
        image = ((x + 1.0) / 2.0).clamp(0.0, 1.0).movedim(1, -1)
        return image.reshape(-1, *image.shape[2:])

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        return self.to_image(self.decode_raw(latent))


def load_vae(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> CogVideoXVAE:
    """The CogVideoX VAE of a file in diffusers' (ComfyUI's) names, computed in float32 as ComfyUI's on a CPU."""
    from diffusers import AutoencoderKLCogVideoX

    path = ref.sources[0] if ref.sources else None
    sd = {k: v for k, v in state_dict.items() if k.startswith(("encoder.", "decoder."))}
    try:
        config = infer_config(sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable CogVideoX VAE: {e}") from None
    module = build_module(lambda: AutoencoderKLCogVideoX(**config), sd, path, "CogVideoX VAE", dtype=torch.float32)
    return CogVideoXVAE(arch="cogvideox", module=module, latent_channels=config["latent_channels"], downscale=SPATIAL)
