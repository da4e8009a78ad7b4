"""ComfyUI's comfy_extras.nodes_freelunch: FreeU and FreeU_V2, output-block patches carried on the MODEL
(nodes.modelfns.network_patches) and applied inside each denoise step.

FreeU scales the backbone features h of the decoder levels whose width is 4x / 2x the model's base width and
damps the low frequencies of the skip features hsp there (a centred 2x2 box of the shifted spectrum)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.inputs import require_model
from nodes.modelfns.network_patches import with_network_patch

MODULE = "comfy_extras.nodes_freelunch"


def fourier_filter(x: torch.Tensor, threshold: int, scale: float) -> torch.Tensor:
    """Multiply the centred low-frequency square (2*threshold wide) of x's 2-D spectrum by scale."""
    freq = torch.fft.fftshift(torch.fft.fftn(x.float(), dim=(-2, -1)), dim=(-2, -1))
    h, w = freq.shape[-2:]
    mask = torch.ones(freq.shape, device=x.device)
    mask[..., h // 2 - threshold : h // 2 + threshold, w // 2 - threshold : w // 2 + threshold] = scale
    out = torch.fft.ifftn(torch.fft.ifftshift(freq * mask, dim=(-2, -1)), dim=(-2, -1)).real
    return out.to(x.dtype)


@dataclass(frozen=True)
class FreeUPatch:
    """output_block_patch of FreeU (v2: the backbone factor follows the normalised channel mean)."""

    b1: float
    b2: float
    s1: float
    s2: float
    v2: bool

    def __call__(self, h: torch.Tensor, hsp: torch.Tensor, options: dict) -> tuple[torch.Tensor, torch.Tensor]:
        channels = options["model_channels"]
        scales = {channels * 4: (self.b1, self.s1), channels * 2: (self.b2, self.s2)}
        scale = scales.get(int(h.shape[1]))
        if scale is None:
            return h, hsp
        half = h.shape[1] // 2
        factor: Any = scale[0]
        if self.v2:
            mean = h.mean(1).unsqueeze(1)
            flat = mean.view(mean.shape[0], -1)
            lo = flat.min(dim=-1, keepdim=True)[0][:, :, None, None]
            hi = flat.max(dim=-1, keepdim=True)[0][:, :, None, None]
            factor = (scale[0] - 1) * ((mean - lo) / (hi - lo)) + 1
        h = h.clone()
        h[:, :half] = h[:, :half] * factor
        return h, fourier_filter(hsp, 1, scale[1])


def _factor(default: float) -> tuple:
    return ("FLOAT", {"default": default, "min": 0.0, "max": 10.0, "step": 0.01})


class FreeU:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "model_patches/unet"
    DESCRIPTION = (
        "FreeU: amplifies the UNet decoder's backbone features (b1, b2) and damps the low frequencies "
        "of its skip connections (s1, s2), free of training."
    )
    V2 = False
    DEFAULTS = (1.1, 1.2, 0.9, 0.2)

    @classmethod
    def INPUT_TYPES(cls):
        b1, b2, s1, s2 = cls.DEFAULTS
        return {
            "required": {
                "model": ("MODEL",),
                "b1": _factor(b1),
                "b2": _factor(b2),
                "s1": _factor(s1),
                "s2": _factor(s2),
            }
        }

    def patch(self, model: Any, b1: float, b2: float, s1: float, s2: float) -> tuple[ModelRef]:
        fn = FreeUPatch(float(b1), float(b2), float(s1), float(s2), self.V2)
        return (with_network_patch(require_model(model), "output_block_patch", fn),)


class FreeU_V2(FreeU):
    DESCRIPTION = (
        "FreeU v2: like FreeU, with the backbone amplification weighted by each position's normalised mean activation."
    )
    V2 = True
    DEFAULTS = (1.3, 1.4, 0.9, 0.2)


NODE_CLASS_MAPPINGS = {"FreeU": FreeU, "FreeU_V2": FreeU_V2}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
