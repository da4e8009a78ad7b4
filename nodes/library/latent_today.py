"""Today's ComfyUI comfy_extras.nodes_latent classes added after 0.3.64: Latent Operation Blend (a
LATENT_OPERATION that pulls a latent toward a reference) and Replace Video Latent Frames (write a source
latent's frames into a video latent at a frame index)."""
from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from nodes.library.latent_ops import NODES_LATENT, repeat_to_batch_size

MAX_RESOLUTION = 16384
log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class BlendToward:
    """lerp(latent, reference, strength), the reference resized (nearest) to the latent's spatial / frame
    size and its batch cycled to the latent's. A dataclass so that it pickles to the executors."""
    reference: torch.Tensor
    strength: float

    def __call__(self, latent: torch.Tensor, **kwargs: object) -> torch.Tensor:
        if self.strength == 0:
            return latent
        target = self.reference.to(latent)
        if target.shape[2:] != latent.shape[2:]:
            target = torch.nn.functional.interpolate(target, size=latent.shape[2:], mode="nearest")
        return torch.lerp(latent, repeat_to_batch_size(target, latent.shape[0]), self.strength)


class LatentOperationBlend:
    RELATIVE_PYTHON_MODULE = NODES_LATENT
    EXPERIMENTAL = True
    FUNCTION = "execute"
    CATEGORY = "model/latent/advanced/operations"
    RETURN_TYPES = ("LATENT_OPERATION",)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = ("Blends the whole latent toward the reference latent (resized with nearest-neighbour "
                   "interpolation when the sizes differ).")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "reference": ("LATENT", {}),
            "strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0, "step": 0.0001,
                                   "tooltip": "0 keeps the latent; 1 gives the resized reference."})}}

    def execute(self, reference: dict, strength: float):
        if not isinstance(reference, dict) or not isinstance(reference.get("samples"), torch.Tensor):
            raise TypeError("reference: expected a LATENT (a dict with 'samples')")
        return (BlendToward(reference["samples"], float(strength)),)


class ReplaceVideoLatentFrames:
    RELATIVE_PYTHON_MODULE = NODES_LATENT
    FUNCTION = "execute"
    CATEGORY = "latent/batch"
    RETURN_TYPES = ("LATENT",)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = "Writes the source latent's frames into the destination video latent from a frame index on."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
                    "destination": ("LATENT", {"tooltip": "The video latent whose frames are replaced."}),
                    "index": ("INT", {"default": 0, "min": -MAX_RESOLUTION, "max": MAX_RESOLUTION, "step": 1,
                                      "tooltip": "First frame replaced; negative counts from the end."})},
                "optional": {"source": ("LATENT", {"tooltip": "The frames to write; none keeps the destination."})}}

    def execute(self, destination: dict, index: int, source: dict | None = None):
        if source is None:
            return (destination,)
        dest, src = destination["samples"], source["samples"]
        if dest.ndim != 5 or src.ndim != 5:
            raise ValueError(f"Replace Video Latent Frames: both latents must be video latents [B,C,T,H,W]; got "
                             f"destination {tuple(dest.shape)} and source {tuple(src.shape)}")
        frames = dest.shape[2]
        start = frames + index if index < 0 else index
        # as ComfyUI: a range that does not fit leaves the destination unchanged, with a warning
        if start > frames or start + src.shape[2] > frames:
            log.warning("Replace Video Latent Frames: %d source frames at index %d do not fit the destination's %d "
                        "frames; destination returned unchanged", src.shape[2], index, frames)
            return (destination,)
        out = dest.clone()
        out[:, :, start:start + src.shape[2]] = src
        # the result keeps the source's other keys, as ComfyUI's does
        return ({**source, "samples": out},)


NODE_CLASS_MAPPINGS = {"LatentOperationBlend": LatentOperationBlend,
                       "ReplaceVideoLatentFrames": ReplaceVideoLatentFrames}
NODE_DISPLAY_NAME_MAPPINGS = {"LatentOperationBlend": "Latent Operation Blend"}
