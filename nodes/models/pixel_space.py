"""ComfyUI's "pixel_space" VAE (VAELoader's last option; comfy/pixel_space_convert.py): the identity for the
pixel-space families (Chroma Radiance, PixelDiT), whose "latents" are the images themselves as 3 channels in [-1, 1].
Encoding maps IMAGE [B,H,W,3] in [0, 1] to [B,3,H,W] in [-1, 1]; decoding maps back and clamps, as ComfyUI's VAE
wraps every first-stage model (process_input / process_output)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nodes.models.components import VAEModel

NAME = "pixel_space"


@dataclass
class PixelSpaceVAE(VAEModel):
    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        return (pixels[..., :3].movedim(-1, 1).float() * 2.0 - 1.0).contiguous()

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        if latent.shape[1] != 3:
            raise ValueError(f"the pixel_space VAE decodes 3-channel pixel latents; this latent has {latent.shape[1]}")
        return torch.clamp((latent.float() + 1.0) / 2.0, 0.0, 1.0).movedim(1, -1).contiguous()


def pixel_space_vae() -> PixelSpaceVAE:
    # ComfyUI's module holds one parameter (its marker); ours keeps one too, so the weight cache sees a module.
    module = torch.nn.Module()
    module.pixel_space_vae = torch.nn.Parameter(torch.tensor(1.0), requires_grad=False)
    return PixelSpaceVAE(arch=NAME, module=module, latent_channels=3, downscale=1)
