"""ComfyUI's latent operations beyond the basics of nodes/latent.py: the transform and blend nodes of its
nodes.py (LatentRotate, LatentFlip, LatentCrop, LatentComposite, LatentBlend), the .latent files
(SaveLatent, LoadLatent) and the arithmetic of `comfy_extras.nodes_latent` (add, subtract, multiply,
interpolate, concat, cut, batch, seed behaviour, latent operations).

A LATENT is a dict {"samples": [B,C,H,W] (or [B,C,T,H,W]), optional "noise_mask", "batch_index"}; the
nodes copy the dict and replace "samples", so a noise mask and seed offsets travel through unchanged.
The arithmetic follows ComfyUI's order of operations so that results are equal bit for bit.

A .latent file is safetensors with "latent_tensor" and an empty "latent_format_version_0" marker (files
without the marker predate it and hold latents scaled by 0.18215), and the prompt as metadata: files
move between ComfyUI and us both ways.

LatentApplyOperationCFG is not offered: it patches a MODEL with a pre-CFG function, and a core MODEL
(cluster.refs.ModelRef) carries no sampler functions to the executors yet.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from nodes import image_io, output_claims
from nodes.image_io import annotated_path, save_image_path
from nodes.output_claims import write_atomic
from nodes.upscale import common_upscale
from nodes.workspace import active

MAX_RESOLUTION = 16384
NODES_LATENT = "comfy_extras.nodes_latent"
# Latents saved before the format marker existed were scaled by SD1's factor; loading undoes it.
LEGACY_LATENT_SCALE = 0.18215


# -- helpers -------------------------------------------------------------------------------------


def repeat_to_batch_size(tensor: torch.Tensor, batch_size: int) -> torch.Tensor:
    """Cut a longer batch to `batch_size`, or cycle a shorter one until it is that long."""
    if tensor.shape[0] > batch_size:
        return tensor.narrow(0, 0, batch_size)
    if tensor.shape[0] < batch_size:
        reps = math.ceil(batch_size / tensor.shape[0])
        return tensor.repeat([reps] + [1] * (tensor.ndim - 1)).narrow(0, 0, batch_size)
    return tensor


def reshape_latent_to(target_shape: torch.Size, latent: torch.Tensor, repeat_batch: bool = True) -> torch.Tensor:
    """`latent` resized (bilinear, center crop) to the target's spatial size, and its batch cycled to the
    target's batch size unless `repeat_batch` is False: how the two-input latent nodes align their inputs."""
    if latent.shape[1:] != target_shape[1:]:
        latent = common_upscale(latent, target_shape[-1], target_shape[-2], "bilinear", "center")
    return repeat_to_batch_size(latent, target_shape[0]) if repeat_batch else latent


def _with_samples(latent: dict, samples: torch.Tensor) -> dict:
    out = latent.copy()
    out["samples"] = samples
    return out


def gaussian_kernel(size: int, sigma: float, device: torch.device | None = None) -> torch.Tensor:
    """A normalised size x size Gaussian over the square [-1, 1]^2 (sigma in those units)."""
    axis = torch.linspace(-1, 1, size, device=device)
    x, y = torch.meshgrid(axis, axis, indexing="ij")
    d = torch.sqrt(x * x + y * y)
    g = torch.exp(-(d * d) / (2.0 * sigma * sigma))
    return g / g.sum()


# -- nodes.py: transforms, composite, blend ---------------------------------------------------------


class LatentRotate:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "samples": ("LATENT",),
                "rotation": (["none", "90 degrees", "180 degrees", "270 degrees"],),
            }
        }

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "rotate"
    CATEGORY = "latent/transform"
    DESCRIPTION = "Rotates the latent images clockwise by a quarter turn, a half turn or three quarters."

    def rotate(self, samples: dict, rotation: str):
        turns = {"90": 1, "180": 2, "270": 3}.get(rotation.split(" ")[0], 0)
        # dims (W, H): positive turns go clockwise as seen in the image
        return (_with_samples(samples, torch.rot90(samples["samples"], k=turns, dims=[3, 2])),)


class LatentFlip:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "samples": ("LATENT",),
                "flip_method": (["x-axis: vertically", "y-axis: horizontally"],),
            }
        }

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "flip"
    CATEGORY = "latent/transform"
    DESCRIPTION = "Mirrors the latent images top to bottom (x-axis) or left to right (y-axis)."

    def flip(self, samples: dict, flip_method: str):
        if flip_method.startswith("x"):
            return (_with_samples(samples, torch.flip(samples["samples"], dims=[2])),)
        if flip_method.startswith("y"):
            return (_with_samples(samples, torch.flip(samples["samples"], dims=[3])),)
        return (samples.copy(),)


class LatentCrop:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "samples": ("LATENT",),
                "width": ("INT", {"default": 512, "min": 64, "max": MAX_RESOLUTION, "step": 8}),
                "height": ("INT", {"default": 512, "min": 64, "max": MAX_RESOLUTION, "step": 8}),
                "x": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 8}),
                "y": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 8}),
            }
        }

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "crop"
    CATEGORY = "latent/transform"
    DESCRIPTION = (
        "Cuts a width x height pixel window at (x, y) out of the latent images; the window "
        "starts at most 64 pixels before the right and bottom edges."
    )

    def crop(self, samples: dict, width: int, height: int, x: int, y: int):
        lat = samples["samples"]
        # ComfyUI's rule, kept as is: the start is pulled back to 8 latent cells before the edge, which
        # for latents smaller than 8 cells is a negative (from the end) index.
        x = min(x // 8, lat.shape[3] - 8)
        y = min(y // 8, lat.shape[2] - 8)
        return (_with_samples(samples, lat[:, :, y : y + height // 8, x : x + width // 8]),)


class LatentComposite:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "samples_to": ("LATENT",),
                "samples_from": ("LATENT",),
                "x": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 8}),
                "y": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 8}),
                "feather": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 8}),
            }
        }

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "composite"
    CATEGORY = "latent"
    DESCRIPTION = (
        "Pastes samples_from into samples_to at pixel position (x, y); feather fades the "
        "pasted edges that lie inside the target over that many pixels."
    )

    def composite(self, samples_to: dict, samples_from: dict, x: int, y: int, feather: int = 0):
        x, y, feather = x // 8, y // 8, feather // 8
        dest = samples_to["samples"]
        out = dest.clone()
        src = samples_from["samples"][:, :, : dest.shape[2] - y, : dest.shape[3] - x]
        region = (slice(None), slice(None), slice(y, y + src.shape[2]), slice(x, x + src.shape[3]))
        if feather == 0:
            out[region] = src
        else:
            mask = _feather_mask(
                src,
                feather,
                top=y != 0,
                bottom=y + src.shape[2] < dest.shape[2],
                left=x != 0,
                right=x + src.shape[3] < dest.shape[3],
            )
            out[region] = src * mask + out[region] * (torch.ones_like(mask) - mask)
        return (_with_samples(samples_to, out),)


def _feather_mask(src: torch.Tensor, feather: int, top: bool, bottom: bool, left: bool, right: bool) -> torch.Tensor:
    """Weights of the pasted latent: ramps of `feather` cells along the edges that lie inside the target
    (ramp values (t+1)/feather multiply, so corners get the product of both ramps)."""
    mask = torch.ones_like(src)
    h, w = mask.shape[2], mask.shape[3]
    for t in range(feather):
        ramp = (1.0 / feather) * (t + 1)
        if top:
            mask[:, :, t : t + 1, :] *= ramp
        if bottom:
            mask[:, :, h - 1 - t : h - t, :] *= ramp
        if left:
            mask[:, :, :, t : t + 1] *= ramp
        if right:
            mask[:, :, :, w - 1 - t : w - t] *= ramp
    return mask


class LatentBlend:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "samples1": ("LATENT",),
                "samples2": ("LATENT",),
                "blend_factor": ("FLOAT", {"default": 0.5, "min": 0, "max": 1, "step": 0.01}),
            }
        }

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "blend"
    CATEGORY = "_for_testing"
    DESCRIPTION = (
        "samples1 * blend_factor + samples2 * (1 - blend_factor); samples2 of another size is "
        "first resized (bicubic, center crop) to samples1's."
    )

    def blend(self, samples1: dict, samples2: dict, blend_factor: float):
        a, b = samples1["samples"], samples2["samples"]
        if a.shape != b.shape:
            b = common_upscale(b, a.shape[3], a.shape[2], "bicubic", crop="center")
        return (_with_samples(samples1, a * blend_factor + b * (1 - blend_factor)),)


# -- .latent files ------------------------------------------------------------------------------


class SaveLatent:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "samples": ("LATENT",),
                "filename_prefix": (
                    "STRING",
                    {"default": "latents/ComfyUI", "tooltip": "Start of the file name, may hold a subfolder."},
                ),
            },
            "hidden": {"prompt": "PROMPT", "extra_pnginfo": "EXTRA_PNGINFO"},
        }

    RETURN_TYPES = ()
    FUNCTION = "save"
    OUTPUT_NODE = True
    CATEGORY = "_for_testing"
    DESCRIPTION = (
        "Writes the latents as a .latent (safetensors) file into the output folder, with the "
        "prompt as metadata; LoadLatent (here or in ComfyUI) reads it back."
    )

    def save(
        self, samples: dict, filename_prefix: str = "ComfyUI", prompt: Any = None, extra_pnginfo: dict | None = None
    ):
        base = active().output_dir
        folder, stem, counter, subfolder, _ = save_image_path(filename_prefix, base)
        # a re-run of this prompt (its head was killed) writes over the name the dead run took
        taken = output_claims.claim(folder, stem, counter)
        if taken.folder != folder:
            subfolder = os.path.relpath(taken.folder, os.path.abspath(base))
        file = f"{taken.stem}_{taken.counter:05}_.latent"
        metadata = None
        if image_io.metadata_enabled():
            metadata = {"prompt": json.dumps(prompt) if prompt is not None else ""}
            for key, value in (extra_pnginfo or {}).items():
                metadata[key] = json.dumps(value)
        tensors = {"latent_tensor": samples["samples"].contiguous(), "latent_format_version_0": torch.tensor([])}
        write_atomic(os.path.join(taken.folder, file), lambda tmp: save_file(tensors, tmp, metadata=metadata))
        return {"ui": {"latents": [{"filename": file, "subfolder": subfolder, "type": "output"}]}}


def list_input_latents() -> list[str]:
    """Sorted names of the .latent files at the top level of the input folder."""
    folder = active().input_dir
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_file() and p.name.endswith(".latent"))


class LoadLatent:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"latent": (list_input_latents(),)}}

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "load"
    CATEGORY = "_for_testing"
    DESCRIPTION = "Reads a .latent file (as SaveLatent writes them) from the input folder."

    def load(self, latent: str):
        tensors = load_file(str(annotated_path(latent)), device="cpu")
        scale = 1.0 if "latent_format_version_0" in tensors else 1.0 / LEGACY_LATENT_SCALE
        return ({"samples": tensors["latent_tensor"].float() * scale},)

    @classmethod
    def IS_CHANGED(cls, latent: str) -> str:
        return hashlib.sha256(annotated_path(latent).read_bytes()).hexdigest()

    @classmethod
    def VALIDATE_INPUTS(cls, latent: str) -> bool | str:
        try:
            ok = annotated_path(latent).is_file()
        except ValueError:  # a name that leaves its folder
            ok = False
        return True if ok else f"Invalid latent file: {latent}"


# -- comfy_extras.nodes_latent: arithmetic --------------------------------------------------------


class _TwoLatents:
    RELATIVE_PYTHON_MODULE = NODES_LATENT

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"samples1": ("LATENT", {}), "samples2": ("LATENT", {})}}

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "execute"
    CATEGORY = "latent/advanced"


class LatentAdd(_TwoLatents):
    DESCRIPTION = "samples1 + samples2 (samples2 resized and its batch cycled to samples1's)."

    def execute(self, samples1: dict, samples2: dict):
        a = samples1["samples"]
        return (_with_samples(samples1, a + reshape_latent_to(a.shape, samples2["samples"])),)


class LatentSubtract(_TwoLatents):
    DESCRIPTION = "samples1 - samples2 (samples2 resized and its batch cycled to samples1's)."

    def execute(self, samples1: dict, samples2: dict):
        a = samples1["samples"]
        return (_with_samples(samples1, a - reshape_latent_to(a.shape, samples2["samples"])),)


class LatentMultiply:
    RELATIVE_PYTHON_MODULE = NODES_LATENT

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "samples": ("LATENT", {}),
                "multiplier": ("FLOAT", {"default": 1.0, "min": -10.0, "max": 10.0, "step": 0.01}),
            }
        }

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "execute"
    CATEGORY = "latent/advanced"
    DESCRIPTION = "Multiplies every latent value by a factor."

    def execute(self, samples: dict, multiplier: float):
        return (_with_samples(samples, samples["samples"] * multiplier),)


class LatentInterpolate:
    RELATIVE_PYTHON_MODULE = NODES_LATENT

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "samples1": ("LATENT", {}),
                "samples2": ("LATENT", {}),
                "ratio": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0, "step": 0.01}),
            }
        }

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "execute"
    CATEGORY = "latent/advanced"
    DESCRIPTION = (
        "Interpolates per position between two latents: the channel directions are mixed by "
        "`ratio` (1 = samples1) and renormalised, the channel magnitudes mixed linearly."
    )

    def execute(self, samples1: dict, samples2: dict, ratio: float):
        a = samples1["samples"]
        b = reshape_latent_to(a.shape, samples2["samples"])
        # norms over the channel axis, divided along the last axes by broadcasting as ComfyUI does
        norm_a = torch.linalg.vector_norm(a, dim=1)
        norm_b = torch.linalg.vector_norm(b, dim=1)
        mixed = torch.nan_to_num(a / norm_a) * ratio + torch.nan_to_num(b / norm_b) * (1.0 - ratio)
        direction = torch.nan_to_num(mixed / torch.linalg.vector_norm(mixed, dim=1))
        return (_with_samples(samples1, direction * (norm_a * ratio + norm_b * (1.0 - ratio))),)


class LatentConcat:
    RELATIVE_PYTHON_MODULE = NODES_LATENT
    # combo value -> the axis counted from the end (x = width, y = height, t = frames)
    AXES = {"x": -1, "y": -2, "t": -3}

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "samples1": ("LATENT", {}),
                "samples2": ("LATENT", {}),
                "dim": ("COMBO", {"multiselect": False, "options": ["x", "-x", "y", "-y", "t", "-t"]}),
            }
        }

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "execute"
    CATEGORY = "latent/advanced"
    DESCRIPTION = (
        "Joins two latents along width (x), height (y) or time (t); a '-' puts samples2 first. "
        "samples2's batch is cycled to samples1's."
    )

    def execute(self, samples1: dict, samples2: dict, dim: str):
        a = samples1["samples"]
        b = repeat_to_batch_size(samples2["samples"], a.shape[0])
        parts = (b, a) if "-" in dim else (a, b)
        axis = next((v for k, v in self.AXES.items() if k in dim), dim)
        return (_with_samples(samples1, torch.cat(parts, dim=axis)),)


class LatentCut:
    RELATIVE_PYTHON_MODULE = NODES_LATENT

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "samples": ("LATENT", {}),
                "dim": ("COMBO", {"multiselect": False, "options": ["x", "y", "t"]}),
                "index": ("INT", {"default": 0, "min": -MAX_RESOLUTION, "max": MAX_RESOLUTION, "step": 1}),
                "amount": ("INT", {"default": 1, "min": 1, "max": MAX_RESOLUTION, "step": 1}),
            }
        }

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "execute"
    CATEGORY = "latent/advanced"
    DESCRIPTION = (
        "Keeps `amount` rows, columns or frames starting at `index` (negative: from the end), "
        "clamped to the latent's size."
    )

    def execute(self, samples: dict, dim: str, index: int, amount: int):
        lat = samples["samples"]
        offset = {"x": 1, "y": 2, "t": 3}
        axis = next((lat.ndim - v for k, v in offset.items() if k in dim), dim)
        size = lat.shape[axis]
        if index >= 0:
            index = min(index, size - 1)
            amount = min(size - index, amount)
        else:
            index = max(index, -size)
            amount = min(-index, amount)
        return (_with_samples(samples, torch.narrow(lat, axis, index, amount)),)


class LatentBatch(_TwoLatents):
    CATEGORY = "latent/batch"
    DESCRIPTION = (
        "Appends samples2's batch to samples1's (samples2 resized to samples1's size); the seed "
        "offsets of both are kept."
    )

    def execute(self, samples1: dict, samples2: dict):
        a = samples1["samples"]
        b = reshape_latent_to(a.shape, samples2["samples"], repeat_batch=False)
        out = _with_samples(samples1, torch.cat((a, b), dim=0))
        out["batch_index"] = samples1.get("batch_index", list(range(a.shape[0]))) + samples2.get(
            "batch_index", list(range(b.shape[0]))
        )
        return (out,)


class LatentBatchSeedBehavior:
    RELATIVE_PYTHON_MODULE = NODES_LATENT

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "samples": ("LATENT", {}),
                "seed_behavior": ("COMBO", {"default": "fixed", "multiselect": False, "options": ["random", "fixed"]}),
            }
        }

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "execute"
    CATEGORY = "latent/advanced"
    DESCRIPTION = (
        "fixed: every item of the batch gets the first item's noise; random: each item gets "
        "its own (the seed offsets are dropped)."
    )

    def execute(self, samples: dict, seed_behavior: str):
        out = samples.copy()
        if seed_behavior == "random":
            out.pop("batch_index", None)
        elif seed_behavior == "fixed":
            out["batch_index"] = [out.get("batch_index", [0])[0]] * samples["samples"].shape[0]
        return (out,)


# -- latent operations: functions of a latent, applied by LatentApplyOperation ---------------------


@dataclass(frozen=True)
class TonemapReinhard:
    """Reinhard tone mapping of the per-position channel magnitude, with the white point at
    (mean + 5 std) * multiplier of each item. A plain dataclass so that it pickles by name."""

    multiplier: float

    def __call__(self, latent: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        magnitude = (torch.linalg.vector_norm(latent, dim=1) + 0.0000000001)[:, None]
        direction = latent / magnitude
        mean = torch.mean(magnitude, dim=(1, 2, 3), keepdim=True)
        std = torch.std(magnitude, dim=(1, 2, 3), keepdim=True)
        top = (std * 5 + mean) * self.multiplier
        magnitude *= 1.0 / top
        mapped = magnitude / (magnitude + 1.0)
        mapped *= top
        return direction * mapped


@dataclass(frozen=True)
class Sharpen:
    """Unsharp-style sharpening of the channel directions (magnitudes kept), with a Gaussian of
    2 * radius + 1 taps and reflect padding."""

    radius: int
    sigma: float
    alpha: float

    def __call__(self, latent: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        luminance = (torch.linalg.vector_norm(latent, dim=1) + 1e-6)[:, None]
        direction = latent / luminance
        channels = latent.shape[1]
        size = self.radius * 2 + 1
        kernel = gaussian_kernel(size, self.sigma, device=luminance.device)
        center = size // 2
        kernel *= self.alpha * -10
        kernel[center, center] = kernel[center, center] - kernel.sum() + 1.0
        r = self.radius
        padded = torch.nn.functional.pad(direction, (r, r, r, r), "reflect")
        sharpened = torch.nn.functional.conv2d(
            padded, kernel.repeat(channels, 1, 1).unsqueeze(1), padding=size // 2, groups=channels
        )[:, :, r:-r, r:-r]
        return luminance * sharpened


class LatentApplyOperation:
    RELATIVE_PYTHON_MODULE = NODES_LATENT
    EXPERIMENTAL = True

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"samples": ("LATENT", {}), "operation": ("LATENT_OPERATION", {})}}

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "execute"
    CATEGORY = "latent/advanced/operations"
    DESCRIPTION = "Applies a latent operation (tone mapping, sharpening, ...) to the latents."

    def execute(self, samples: dict, operation: Any):
        return (_with_samples(samples, operation(latent=samples["samples"])),)


class LatentOperationTonemapReinhard:
    RELATIVE_PYTHON_MODULE = NODES_LATENT
    EXPERIMENTAL = True

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"multiplier": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 100.0, "step": 0.01})}}

    RETURN_TYPES = ("LATENT_OPERATION",)
    FUNCTION = "execute"
    CATEGORY = "latent/advanced/operations"
    DESCRIPTION = "A latent operation that compresses large channel magnitudes (Reinhard tone mapping)."

    def execute(self, multiplier: float):
        return (TonemapReinhard(multiplier),)


class LatentOperationSharpen:
    RELATIVE_PYTHON_MODULE = NODES_LATENT
    EXPERIMENTAL = True

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "sharpen_radius": ("INT", {"default": 9, "min": 1, "max": 31, "step": 1}),
                "sigma": ("FLOAT", {"default": 1.0, "min": 0.1, "max": 10.0, "step": 0.1}),
                "alpha": ("FLOAT", {"default": 0.1, "min": 0.0, "max": 5.0, "step": 0.01}),
            }
        }

    RETURN_TYPES = ("LATENT_OPERATION",)
    FUNCTION = "execute"
    CATEGORY = "latent/advanced/operations"
    DESCRIPTION = "A latent operation that sharpens the latents' channel directions."

    def execute(self, sharpen_radius: int, sigma: float, alpha: float):
        return (Sharpen(sharpen_radius, sigma, alpha),)


NODE_CLASS_MAPPINGS = {
    "LatentRotate": LatentRotate,
    "LatentFlip": LatentFlip,
    "LatentCrop": LatentCrop,
    "LatentComposite": LatentComposite,
    "LatentBlend": LatentBlend,
    "SaveLatent": SaveLatent,
    "LoadLatent": LoadLatent,
    "LatentAdd": LatentAdd,
    "LatentSubtract": LatentSubtract,
    "LatentMultiply": LatentMultiply,
    "LatentInterpolate": LatentInterpolate,
    "LatentConcat": LatentConcat,
    "LatentCut": LatentCut,
    "LatentBatch": LatentBatch,
    "LatentBatchSeedBehavior": LatentBatchSeedBehavior,
    "LatentApplyOperation": LatentApplyOperation,
    "LatentOperationTonemapReinhard": LatentOperationTonemapReinhard,
    "LatentOperationSharpen": LatentOperationSharpen,
}

# The comfy_extras classes have no display name in ComfyUI (the frontend shows the class name).
NODE_DISPLAY_NAME_MAPPINGS = {
    "LatentRotate": "Rotate Latent",
    "LatentFlip": "Flip Latent",
    "LatentCrop": "Crop Latent",
    "LatentComposite": "Latent Composite",
    "LatentBlend": "Latent Blend",
}
