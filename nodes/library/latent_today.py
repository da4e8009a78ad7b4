"""Today's ComfyUI latent utilities added after 0.3.64: Latent Operation Blend (a LATENT_OPERATION that pulls a
latent toward a reference), Replace Video Latent Frames (write a source latent's frames into a video latent at a
frame index), Trim Video Latent (drop leading frames) and Normalize Video Latent Start (match the first frames'
statistics to the frames after them). The video ones work on any [B,C,T,H,W] latent, whatever its model."""

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
    DESCRIPTION = (
        "Blends the whole latent toward the reference latent (resized with nearest-neighbour "
        "interpolation when the sizes differ)."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "reference": ("LATENT", {}),
                "strength": (
                    "FLOAT",
                    {
                        "default": 1.0,
                        "min": 0.0,
                        "max": 1.0,
                        "step": 0.0001,
                        "tooltip": "0 keeps the latent; 1 gives the resized reference.",
                    },
                ),
            }
        }

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
        return {
            "required": {
                "destination": ("LATENT", {"tooltip": "The video latent whose frames are replaced."}),
                "index": (
                    "INT",
                    {
                        "default": 0,
                        "min": -MAX_RESOLUTION,
                        "max": MAX_RESOLUTION,
                        "step": 1,
                        "tooltip": "First frame replaced; negative counts from the end.",
                    },
                ),
            },
            "optional": {"source": ("LATENT", {"tooltip": "The frames to write; none keeps the destination."})},
        }

    def execute(self, destination: dict, index: int, source: dict | None = None):
        if source is None:
            return (destination,)
        dest, src = destination["samples"], source["samples"]
        if dest.ndim != 5 or src.ndim != 5:
            raise ValueError(
                f"Replace Video Latent Frames: both latents must be video latents [B,C,T,H,W]; got "
                f"destination {tuple(dest.shape)} and source {tuple(src.shape)}"
            )
        frames = dest.shape[2]
        start = frames + index if index < 0 else index
        # as ComfyUI: a range that does not fit leaves the destination unchanged, with a warning
        if start > frames or start + src.shape[2] > frames:
            log.warning(
                "Replace Video Latent Frames: %d source frames at index %d do not fit the destination's %d "
                "frames; destination returned unchanged",
                src.shape[2],
                index,
                frames,
            )
            return (destination,)
        out = dest.clone()
        out[:, :, start : start + src.shape[2]] = src
        # the result keeps the source's other keys, as ComfyUI's does
        return ({**source, "samples": out},)


def _video(latent: dict, node: str) -> torch.Tensor:
    samples = latent.get("samples") if isinstance(latent, dict) else None
    if not isinstance(samples, torch.Tensor) or samples.ndim != 5:
        shape = tuple(samples.shape) if isinstance(samples, torch.Tensor) else type(latent).__name__
        raise ValueError(f"{node}: expected a video latent [B,C,T,H,W]; got {shape}")
    return samples


class TrimVideoLatent:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_wan"
    FUNCTION = "execute"
    CATEGORY = "latent/video"
    RETURN_TYPES = ("LATENT",)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = "Drops the first trim_amount frames of a video latent."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"samples": ("LATENT", {}), "trim_amount": ("INT", {"default": 0, "min": 0, "max": 99999})}}

    def execute(self, samples: dict, trim_amount: int):
        return ({**samples, "samples": _video(samples, "Trim Video Latent")[:, :, trim_amount:]},)


def match_start_statistics(start: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """`start` frames standardised per (item, frame) over C,H,W, then given the reference frames' overall mean
    and std, each kept within a band around the frame's own (mean -0.3/+0.35, std -0.35/+0.5) so that a very
    different reference cannot swing the first frames far."""
    mean = start.mean(dim=(1, 3, 4), keepdim=True)
    std = start.std(dim=(1, 3, 4), keepdim=True)
    target_mean = torch.clamp(reference.mean(), mean - 0.3, mean + 0.35)
    target_std = torch.clamp(reference.std(), std - 0.35, std + 0.5)
    return (start - mean) / (std + 1e-8) * target_std + target_mean


class NormalizeVideoLatentStart:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_kandinsky5"
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    RETURN_TYPES = ("LATENT",)
    RETURN_NAMES = ("latent",)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = (
        "Gives the first frames of a video latent the mean and standard deviation of the frames that "
        "follow them, so that the start does not stand out from the rest of the video."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "latent": ("LATENT", {}),
                "start_frame_count": (
                    "INT",
                    {
                        "default": 4,
                        "min": 1,
                        "max": MAX_RESOLUTION,
                        "step": 1,
                        "tooltip": "How many frames from the start are normalised.",
                    },
                ),
                "reference_frame_count": (
                    "INT",
                    {
                        "default": 5,
                        "min": 1,
                        "max": MAX_RESOLUTION,
                        "step": 1,
                        "tooltip": "How many frames after those give the statistics.",
                    },
                ),
            }
        }

    def execute(self, latent: dict, start_frame_count: int, reference_frame_count: int):
        samples = _video(latent, "Normalize Video Latent Start")
        if samples.shape[2] <= 1:
            return (latent,)
        out = samples.clone()
        # as ComfyUI: the reference is at most T - 1 frames long, counted from the end of the start frames
        count = min(reference_frame_count, samples.shape[2] - 1)
        reference = samples[:, :, start_frame_count : start_frame_count + count]
        out[:, :, :start_frame_count] = match_start_statistics(samples[:, :, :start_frame_count], reference)
        return ({**latent, "samples": out},)


NODE_CLASS_MAPPINGS = {
    "LatentOperationBlend": LatentOperationBlend,
    "ReplaceVideoLatentFrames": ReplaceVideoLatentFrames,
    "TrimVideoLatent": TrimVideoLatent,
    "NormalizeVideoLatentStart": NormalizeVideoLatentStart,
}
NODE_DISPLAY_NAME_MAPPINGS = {"LatentOperationBlend": "Latent Operation Blend"}
