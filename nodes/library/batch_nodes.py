"""Today's ComfyUI batch nodes (`comfy_extras.nodes_post_processing`, added after 0.3.64): Batch Images,
Batch Masks and Batch Latents join any number of linked inputs (image0, image1, ...) into one batch, each
resized to the first one's size as ComfyUI does (bilinear, centre crop)."""

from __future__ import annotations

from typing import Any

import torch

from nodes.dynamic_inputs import DynamicSection, autogrow_prefix, group
from nodes.library.latent_ops import reshape_latent_to
from nodes.upscale import common_upscale

MODULE = "comfy_extras.nodes_post_processing"
MAX_INPUTS = 50


def _to_first_size(first: torch.Tensor, item: torch.Tensor) -> torch.Tensor:
    """An [N,H,W,C] image resized to the first one's height and width."""
    if item.shape[1:3] == first.shape[1:3]:
        return item
    return common_upscale(item.movedim(-1, 1), first.shape[2], first.shape[1], "bilinear", "center").movedim(1, -1)


def batch_images(images: list[torch.Tensor]) -> torch.Tensor:
    channels = max(image.shape[-1] for image in images)
    # RGB beside RGBA gains an opaque alpha channel, as ComfyUI pads it (one channel of 1.0)
    padded = [torch.nn.functional.pad(i, (0, 1), value=1.0) if i.shape[-1] < channels else i for i in images]
    return torch.cat([_to_first_size(padded[0], image) for image in padded], dim=0)


def batch_masks(masks: list[torch.Tensor]) -> torch.Tensor:
    first = masks[0]
    resized = [
        m
        if m.shape[1:] == first.shape[1:]
        else common_upscale(
            m.reshape(-1, 1, m.shape[-2], m.shape[-1]), first.shape[-1], first.shape[-2], "bilinear", "center"
        ).squeeze(1)
        for m in masks
    ]
    return torch.cat(resized, dim=0)


def batch_latents(latents: list[dict]) -> dict:
    first = latents[0]["samples"]
    out = dict(latents[0])
    out["samples"] = torch.cat(
        [reshape_latent_to(first.shape, item["samples"], repeat_batch=False) for item in latents], dim=0
    )
    # each input keeps its own batch indices (or 0..n-1), one after another
    out["batch_index"] = [i for item in latents for i in item.get("batch_index", range(item["samples"].shape[0]))]
    return out


class _BatchNode:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    KIND = ""  # IMAGE, MASK or LATENT
    ITEM = ""  # the name of one input: image, mask, latent
    JOIN: Any = None

    @classmethod
    def group_spec(cls) -> tuple:
        return autogrow_prefix(cls.ITEM, (cls.KIND, {}), prefix=cls.ITEM, minimum=2, maximum=MAX_INPUTS)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": DynamicSection({cls.ITEM + "s": cls.group_spec()})}

    def execute(self, **kwargs: Any):
        items = list(group(kwargs, self.ITEM + "s", self.group_spec()).values())
        if not items:
            raise ValueError(f"{type(self).__name__}: no {self.ITEM} is linked")
        return (type(self).JOIN(items),)


class BatchImagesNode(_BatchNode):
    KIND, ITEM, JOIN = "IMAGE", "image", staticmethod(batch_images)
    RETURN_TYPES = ("IMAGE",)
    OUTPUT_TOOLTIPS = (None,)
    CATEGORY = "image"
    SEARCH_ALIASES = ["batch", "image batch", "batch images", "combine images", "merge images", "stack images"]
    DESCRIPTION = "One batch of the linked images, each resized to the first one's size."


class BatchMasksNode(_BatchNode):
    KIND, ITEM, JOIN = "MASK", "mask", staticmethod(batch_masks)
    RETURN_TYPES = ("MASK",)
    OUTPUT_TOOLTIPS = (None,)
    CATEGORY = "mask"
    DESCRIPTION = "One batch of the linked masks, each resized to the first one's size."


class BatchLatentsNode(_BatchNode):
    KIND, ITEM, JOIN = "LATENT", "latent", staticmethod(batch_latents)
    RETURN_TYPES = ("LATENT",)
    OUTPUT_TOOLTIPS = (None,)
    CATEGORY = "latent"
    DESCRIPTION = "One batch of the linked latents, each resized to the first one's size."


NODE_CLASS_MAPPINGS = {cls.__name__: cls for cls in (BatchImagesNode, BatchMasksNode, BatchLatentsNode)}
NODE_DISPLAY_NAME_MAPPINGS = {
    "BatchImagesNode": "Batch Images",
    "BatchMasksNode": "Batch Masks",
    "BatchLatentsNode": "Batch Latents",
}
