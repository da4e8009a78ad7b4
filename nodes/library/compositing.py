"""ComfyUI's alpha compositing nodes (comfy_extras.nodes_compositing): the Porter-Duff operators on an image
with its MASK, and splitting/joining an image's alpha channel.

A MASK here is the inverse of alpha (1 = transparent), as LoadImage makes it; the operators work on
premultiplied colour and convert back. The formulas keep ComfyUI's grouping so results are bit-identical.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from nodes.upscale import common_upscale

MODULE = "comfy_extras.nodes_compositing"

Tensor = torch.Tensor
# mode -> (alpha(sa, da), colour(sc, sa, dc, da)), colours premultiplied; in ComfyUI's enum order.
PORTER_DUFF: dict[
    str, tuple[Callable[[Tensor, Tensor], Tensor], Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]]
] = {
    "ADD": (lambda sa, da: torch.clamp(sa + da, 0, 1), lambda sc, sa, dc, da: torch.clamp(sc + dc, 0, 1)),
    "CLEAR": (lambda sa, da: torch.zeros_like(da), lambda sc, sa, dc, da: torch.zeros_like(dc)),
    "DARKEN": (
        lambda sa, da: sa + da - sa * da,
        lambda sc, sa, dc, da: (1 - da) * sc + (1 - sa) * dc + torch.min(sc, dc),
    ),
    "DST": (lambda sa, da: da, lambda sc, sa, dc, da: dc),
    "DST_ATOP": (lambda sa, da: sa, lambda sc, sa, dc, da: sa * dc + (1 - da) * sc),
    "DST_IN": (lambda sa, da: sa * da, lambda sc, sa, dc, da: dc * sa),
    "DST_OUT": (lambda sa, da: (1 - sa) * da, lambda sc, sa, dc, da: (1 - sa) * dc),
    "DST_OVER": (lambda sa, da: da + (1 - da) * sa, lambda sc, sa, dc, da: dc + (1 - da) * sc),
    "LIGHTEN": (
        lambda sa, da: sa + da - sa * da,
        lambda sc, sa, dc, da: (1 - da) * sc + (1 - sa) * dc + torch.max(sc, dc),
    ),
    "MULTIPLY": (lambda sa, da: sa * da, lambda sc, sa, dc, da: sc * dc),
    "OVERLAY": (
        lambda sa, da: sa + da - sa * da,
        lambda sc, sa, dc, da: torch.where(2 * dc < da, 2 * sc * dc, sa * da - 2 * (da - sc) * (sa - dc)),
    ),
    "SCREEN": (lambda sa, da: sa + da - sa * da, lambda sc, sa, dc, da: sc + dc - sc * dc),
    "SRC": (lambda sa, da: sa, lambda sc, sa, dc, da: sc),
    "SRC_ATOP": (lambda sa, da: da, lambda sc, sa, dc, da: da * sc + (1 - sa) * dc),
    "SRC_IN": (lambda sa, da: sa * da, lambda sc, sa, dc, da: sc * da),
    "SRC_OUT": (lambda sa, da: (1 - da) * sa, lambda sc, sa, dc, da: (1 - da) * sc),
    "SRC_OVER": (lambda sa, da: sa + (1 - sa) * da, lambda sc, sa, dc, da: sc + (1 - sa) * dc),
    "XOR": (lambda sa, da: (1 - da) * sa + (1 - sa) * da, lambda sc, sa, dc, da: (1 - da) * sc + (1 - sa) * dc),
}


def porter_duff(src: Tensor, src_mask: Tensor, dst: Tensor, dst_mask: Tensor, mode: str) -> tuple[Tensor, Tensor]:
    """Composite one [H,W,C] source over a destination with the [H,W,1] masks; returns (colour, mask)."""
    alpha_of, colour_of = PORTER_DUFF[mode]
    sa, da = 1 - src_mask, 1 - dst_mask
    sc, dc = src * sa, dst * da
    out_alpha = alpha_of(sa, da)
    out = colour_of(sc, sa, dc, da)
    # Un-premultiply; a (nearly) transparent pixel gets black.
    out = torch.clamp(torch.where(out_alpha > 1e-5, out / out_alpha, torch.zeros_like(out)), 0, 1)
    return out, 1 - out_alpha


def _fit(hwc: Tensor, height: int, width: int) -> Tensor:
    """[H,W,C] resized to height x width, bicubic with centre crop (how the node reconciles sizes)."""
    return (
        common_upscale(hwc.unsqueeze(0).permute(0, 3, 1, 2), width, height, "bicubic", "center")
        .permute(0, 2, 3, 1)
        .squeeze(0)
    )


class PorterDuffImageComposite:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "source": ("IMAGE",),
                "source_alpha": ("MASK",),
                "destination": ("IMAGE",),
                "destination_alpha": ("MASK",),
                "mode": (
                    "COMBO",
                    {
                        "options": list(PORTER_DUFF),
                        "default": "DST",
                        "multiselect": False,
                        "tooltip": "The Porter-Duff operator (SRC_OVER: source over destination).",
                    },
                ),
            }
        }

    RETURN_TYPES = ("IMAGE", "MASK")
    FUNCTION = "execute"
    CATEGORY = "mask/compositing"
    DESCRIPTION = (
        "Composites a source image over a destination with a Porter-Duff operator, using their "
        "masks as transparency; sizes differing from the destination's are resized to it."
    )

    def execute(self, source: Tensor, source_alpha: Tensor, destination: Tensor, destination_alpha: Tensor, mode: str):
        images, masks = [], []
        for i in range(min(len(source), len(source_alpha), len(destination), len(destination_alpha))):
            src, dst = source[i], destination[i]
            if src.shape[2] != dst.shape[2]:  # ComfyUI asserts equal channel counts, with no message
                raise AssertionError()
            src_mask, dst_mask = source_alpha[i].unsqueeze(2), destination_alpha[i].unsqueeze(2)
            if dst_mask.shape[:2] != dst.shape[:2]:
                dst_mask = _fit(dst_mask, dst.shape[0], dst.shape[1])
            if src.shape != dst.shape:
                src = _fit(src, dst.shape[0], dst.shape[1])
            if src_mask.shape != dst_mask.shape:
                src_mask = _fit(src_mask, dst_mask.shape[0], dst_mask.shape[1])
            image, mask = porter_duff(src, src_mask, dst, dst_mask, mode)
            images.append(image)
            masks.append(mask.squeeze(2))
        return (torch.stack(images), torch.stack(masks))


class SplitImageWithAlpha:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    RETURN_TYPES = ("IMAGE", "MASK")
    FUNCTION = "execute"
    CATEGORY = "mask/compositing"
    DESCRIPTION = "Splits an RGBA image into its RGB image and a mask (1 - alpha; all 0 without alpha)."

    def execute(self, image: Tensor):
        rgb = torch.stack([item[:, :, :3] for item in image])
        alpha = torch.stack([item[:, :, 3] if item.shape[2] > 3 else torch.ones_like(item[:, :, 0]) for item in image])
        return (rgb, 1.0 - alpha)


class JoinImageWithAlpha:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",), "alpha": ("MASK",)}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "execute"
    CATEGORY = "mask/compositing"
    DESCRIPTION = "Adds an alpha channel (1 - mask, resized to the image) to the RGB image."

    def execute(self, image: Tensor, alpha: Tensor):
        planes = alpha.reshape((-1, 1, alpha.shape[-2], alpha.shape[-1]))
        opacity = 1.0 - F.interpolate(planes, size=(image.shape[1], image.shape[2]), mode="bilinear").squeeze(1)
        count = min(len(image), len(alpha))
        return (torch.stack([torch.cat((image[i][:, :, :3], opacity[i].unsqueeze(2)), dim=2) for i in range(count)]),)


NODE_CLASS_MAPPINGS = {
    "PorterDuffImageComposite": PorterDuffImageComposite,
    "SplitImageWithAlpha": SplitImageWithAlpha,
    "JoinImageWithAlpha": JoinImageWithAlpha,
}

NODE_DISPLAY_NAME_MAPPINGS = {
    "PorterDuffImageComposite": "Porter-Duff Image Composite",
    "SplitImageWithAlpha": "Split Image with Alpha",
    "JoinImageWithAlpha": "Join Image with Alpha",
}
