"""The KL autoencoder: config from tensor shapes, ldm <-> diffusers keys, and ComfyUI's encode/decode."""

from __future__ import annotations

import re
from typing import Any

import torch

from .components import VAEModel
from .errors import ModelLoadError
from .unet import norm_groups

LDM_VAE_PREFIX = "first_stage_model."
Shapes = dict[str, tuple[int, ...]]


def is_diffusers_layout(keys) -> bool:
    return any(k.startswith("encoder.down_blocks.") or k.startswith("decoder.up_blocks.") for k in keys)


def _levels_and_res(shapes: Shapes, diffusers: bool) -> tuple[int, int]:
    pat = r"encoder\.down_blocks\.(\d+)\.resnets\.(\d+)\." if diffusers else r"encoder\.down\.(\d+)\.block\.(\d+)\."
    found = [tuple(map(int, m.groups())) for k in shapes if (m := re.match(pat, k))]
    if not found:
        raise KeyError("encoder down blocks")
    return max(i for i, _ in found) + 1, max(j for _, j in found) + 1


def _pairs(levels: int, res: int) -> list[tuple[str, str]]:
    """(ldm prefix, diffusers prefix) for every block of a VAE with these counts."""
    p = [("encoder.norm_out.", "encoder.conv_norm_out."), ("decoder.norm_out.", "decoder.conv_norm_out.")]
    for side in ("encoder", "decoder"):
        p += [
            (f"{side}.mid.block_1.", f"{side}.mid_block.resnets.0."),
            (f"{side}.mid.block_2.", f"{side}.mid_block.resnets.1."),
            (f"{side}.mid.attn_1.", f"{side}.mid_block.attentions.0."),
        ]
    for i in range(levels):
        for j in range(res):
            p.append((f"encoder.down.{i}.block.{j}.", f"encoder.down_blocks.{i}.resnets.{j}."))
        p.append((f"encoder.down.{i}.downsample.", f"encoder.down_blocks.{i}.downsamplers.0."))
        for j in range(res + 1):
            p.append((f"decoder.up.{levels - 1 - i}.block.{j}.", f"decoder.up_blocks.{i}.resnets.{j}."))
        p.append((f"decoder.up.{levels - 1 - i}.upsample.", f"decoder.up_blocks.{i}.upsamplers.0."))
    return p


_ATTN = {"norm": "group_norm", "q": "to_q", "k": "to_k", "v": "to_v", "proj_out": "to_out.0"}
_RES = {"nin_shortcut": "conv_shortcut"}


def _rename(key: str, pairs: list[tuple[str, str]], to_diffusers: bool) -> tuple[str, bool]:
    for ldm, dif in pairs:
        src, dst = (ldm, dif) if to_diffusers else (dif, ldm)
        if key.startswith(src):
            rest = key[len(src) :]
            head, _, tail = rest.rpartition(".")
            is_attn = ".mid.attn_1." in ldm
            table = _ATTN if is_attn else _RES
            if not to_diffusers:
                table = {v: k for k, v in table.items()}
            return dst + (f"{table.get(head, head)}.{tail}" if head else tail), is_attn
    return key, False


def ldm_to_diffusers(sd: dict[str, torch.Tensor], path: str | None = None) -> dict[str, torch.Tensor]:
    """ldm VAE keys -> AutoencoderKL keys; the mid attention's 1x1 convs become linear weights."""
    try:
        pairs = _pairs(*_levels_and_res(sd, False))
    except KeyError:
        raise ModelLoadError(path, "no VAE encoder blocks found") from None
    out = {}
    for k, v in sd.items():
        name, attn = _rename(k, pairs, True)
        out[name] = v.reshape(v.shape[:2]) if attn and v.dim() == 4 else v
    return out


def diffusers_to_ldm(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    pairs = _pairs(*_levels_and_res(sd, True))
    out = {}
    for k, v in sd.items():
        name, attn = _rename(k, pairs, False)
        out[name] = v.reshape(*v.shape, 1, 1) if attn and name.endswith("weight") and v.dim() == 2 else v
    return out


def diffusers_config(sd: dict[str, Any], path: str | None = None) -> dict[str, Any]:
    """AutoencoderKL config from diffusers-layout shapes."""

    def shape(k: str) -> tuple[int, ...]:
        if k not in sd:
            raise ModelLoadError(path, f"incomplete VAE: tensor {k} is missing")
        return tuple(sd[k].shape)

    try:
        levels, res = _levels_and_res(sd, True)
    except KeyError:
        raise ModelLoadError(path, "no VAE encoder blocks found") from None
    channels = [shape(f"encoder.down_blocks.{i}.resnets.0.conv2.weight")[0] for i in range(levels)]
    latent = shape("decoder.conv_in.weight")[1]
    return {
        "in_channels": shape("encoder.conv_in.weight")[1],
        "out_channels": shape("decoder.conv_out.weight")[0],
        "latent_channels": latent,
        "block_out_channels": tuple(channels),
        "layers_per_block": res,
        "down_block_types": ("DownEncoderBlock2D",) * levels,
        "up_block_types": ("UpDecoderBlock2D",) * levels,
        "norm_num_groups": norm_groups(channels),
        "use_quant_conv": "quant_conv.weight" in sd,
        "use_post_quant_conv": "post_quant_conv.weight" in sd,
        "mid_block_add_attention": "encoder.mid_block.attentions.0.to_q.weight" in sd,
    }


class KLVAE(VAEModel):
    """ComfyUI's VAE conventions over an AutoencoderKL: pixels 0..1 in [B,H,W,3], raw (unscaled) latents."""

    @torch.no_grad()
    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        pixels = crop_to_multiple(pixels, self.downscale)
        x = pixels[..., :3].movedim(-1, 1).to(self.module.dtype) * 2.0 - 1.0
        return self.module.encode(x).latent_dist.mode().float()

    @torch.no_grad()
    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        if latent.shape[1] != self.latent_channels:
            raise ValueError(f"this VAE takes {self.latent_channels}-channel latents, got {latent.shape[1]}")
        x = self.module.decode(latent.to(self.module.dtype)).sample.float()
        return ((x + 1.0) / 2.0).clamp(0.0, 1.0).movedim(1, -1)


def crop_to_multiple(pixels: torch.Tensor, m: int) -> torch.Tensor:
    """Centre-crop IMAGE [B,H,W,C] to multiples of m, as ComfyUI does before encoding."""
    for d in (1, 2):
        size = pixels.shape[d]
        keep = size // m * m
        if keep == 0:
            raise ValueError(f"image side {size} is smaller than the VAE's downscale {m}")
        if keep != size:
            pixels = pixels.narrow(d, (size % m) // 2, keep)
    return pixels
