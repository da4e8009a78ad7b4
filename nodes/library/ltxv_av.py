"""The latent and image nodes of LTX-2's audio-video workflows (ComfyUI's comfy_extras.nodes_lt):
EmptyLTXVLatentVideo (the 128-channel, 32x spatial / 8x temporal video latent), LTXVConcatAVLatent and
LTXVSeparateAVLatent (one LATENT holding the video and the audio latent side by side, as ComfyUI's NestedTensor
does), LTXVCropGuides (drops the guide frames LTXVAddGuide appended), LTXVPreprocess (an H.264 round trip
of the start image, so it looks like the compressed video frames the model was trained on) and
LTXVImgToVideoInplace (the start image's latent written over the first latent frames, kept by a noise mask) and
LTXVAddGuide (images appended as guide latent frames at chosen frame positions: keyframe_idxs, read by the LTX-2
transformer as those tokens' positions).

Semantics follow ComfyUI 0.10.0 (commit 79cdbc81), checked by tests/nodes/test_ltxv_av.py against the values
scripts/record_comfyui_ltxv_av.py recorded from it (LTXVImgToVideoInplace by tests/nodes/test_ltx2_sampling.py,
LTXVAddGuide by tests/nodes/test_ltxv_add_guide.py). The
LTX-2 networks themselves are in nodes.models.ltx2*."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import torch

from nodes import MAX_RESOLUTION
from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.media import av

MODULE = "comfy_extras.nodes_lt"
LATENT_CHANNELS = 128
SPATIAL, TEMPORAL = 32, 8


class AVLatent:
    """A video latent and an audio latent (or their noise masks) travelling as one LATENT's samples. It answers
    to what code written for ComfyUI's NestedTensor reads first: `is_nested`, `unbind()` and `tensors`."""

    is_nested = True

    def __init__(self, tensors: tuple[torch.Tensor, ...] | list[torch.Tensor]) -> None:
        self.tensors = list(tensors)

    def unbind(self) -> list[torch.Tensor]:
        return self.tensors

    def __repr__(self) -> str:
        return f"AVLatent({', '.join(str(tuple(t.shape)) for t in self.tensors)})"


def _latent(value: Any, input_name: str) -> dict:
    if not isinstance(value, dict) or "samples" not in value:
        raise TypeError(f"{input_name}: expected a LATENT (a dict with 'samples'), got {type(value).__name__}")
    return value


def _video_samples(latent: dict, input_name: str) -> torch.Tensor:
    samples = latent["samples"]
    if not isinstance(samples, torch.Tensor) or samples.ndim != 5:
        shape = tuple(samples.shape) if isinstance(samples, torch.Tensor) else type(samples).__name__
        raise ValueError(f"{input_name}: expected a video latent [batch, channels, frames, height, width], got {shape}")
    return samples


class EmptyLTXVLatentVideo:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "latent/video/ltxv"
    RETURN_TYPES = ("LATENT",)
    DESCRIPTION = "An all-zero LTX-Video latent: 128 channels, 1/32 of the size, 1 + (length - 1) // 8 frames."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "width": ("INT", {"default": 768, "min": 64, "max": MAX_RESOLUTION, "step": 32}),
                "height": ("INT", {"default": 512, "min": 64, "max": MAX_RESOLUTION, "step": 32}),
                "length": ("INT", {"default": 97, "min": 1, "max": MAX_RESOLUTION, "step": 8}),
                "batch_size": ("INT", {"default": 1, "min": 1, "max": 4096}),
            }
        }

    def execute(self, width: int, height: int, length: int, batch_size: int = 1):
        frames = (int(length) - 1) // TEMPORAL + 1
        return (
            {
                "samples": torch.zeros(
                    int(batch_size), LATENT_CHANNELS, frames, int(height) // SPATIAL, int(width) // SPATIAL
                )
            },
        )


class LTXVConcatAVLatent:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "latent/video/ltxv"
    RETURN_TYPES = ("LATENT",)
    RETURN_NAMES = ("latent",)
    DESCRIPTION = (
        "One LATENT carrying the video and the audio latent for LTX-2's joint sampling; where either has "
        "a noise mask, the other gets an all-ones mask of its own shape."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"video_latent": ("LATENT",), "audio_latent": ("LATENT",)}}

    def execute(self, video_latent: dict, audio_latent: dict):
        video, audio = _latent(video_latent, "video_latent"), _latent(audio_latent, "audio_latent")
        for name, part in (("video_latent", video), ("audio_latent", audio)):
            if getattr(part["samples"], "is_nested", False):
                raise ValueError(f"{name}: already an audio-video latent; separate it first")
        # The audio latent's keys (its sample rate and type) win over the video's, as in ComfyUI.
        out = {**video, **audio}
        video_mask, audio_mask = video.get("noise_mask"), audio.get("noise_mask")
        if video_mask is not None or audio_mask is not None:
            out["noise_mask"] = AVLatent(
                (
                    torch.ones_like(video["samples"]) if video_mask is None else video_mask,
                    torch.ones_like(audio["samples"]) if audio_mask is None else audio_mask,
                )
            )
        out["samples"] = AVLatent((video["samples"], audio["samples"]))
        return (out,)


class LTXVSeparateAVLatent:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "latent/video/ltxv"
    RETURN_TYPES = ("LATENT", "LATENT")
    RETURN_NAMES = ("video_latent", "audio_latent")
    DESCRIPTION = "LTXV Separate AV Latent"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"av_latent": ("LATENT",)}}

    def execute(self, av_latent: dict):
        latent = _latent(av_latent, "av_latent")
        if not isinstance(latent["samples"], AVLatent):
            raise TypeError(
                "av_latent: expected an audio-video latent (from LTXV Concat AV Latent), got a "
                f"plain latent of shape {tuple(latent['samples'].shape)}"
            )
        video, audio = dict(latent), dict(latent)
        video["samples"], audio["samples"] = latent["samples"].unbind()[:2]
        masks = latent.get("noise_mask")
        if masks is not None:
            video["noise_mask"], audio["noise_mask"] = masks.unbind()[:2]
        return (video, audio)


def _keyframe_count(conditioning: list) -> int:
    """How many guide latents LTXVAddGuide appended: the distinct start frames in the first keyframe_idxs."""
    for _, values in conditioning:
        idxs = values.get("keyframe_idxs")
        if idxs is not None:
            return int(torch.unique(idxs[:, 0, :, 0]).shape[0])
    return 0


class LTXVCropGuides:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    DESCRIPTION = (
        "Removes the guide frames LTXV Add Guide appended to the latent (and their keyframe indices from "
        "both conditionings); the latent always leaves with a noise mask."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"positive": ("CONDITIONING",), "negative": ("CONDITIONING",), "latent": ("LATENT",)}}

    def execute(self, positive: list, negative: list, latent: dict):
        positive, negative = require(positive, "positive"), require(negative, "negative")
        samples = _video_samples(_latent(latent, "latent"), "latent").clone()
        mask = latent.get("noise_mask")
        mask = torch.ones(samples.shape[0], 1, samples.shape[2], 1, 1) if mask is None else mask.clone()
        count = _keyframe_count(positive)
        if count == 0:
            return (positive, negative, {"samples": samples, "noise_mask": mask})
        return (
            set_values(positive, {"keyframe_idxs": None}),
            set_values(negative, {"keyframe_idxs": None}),
            {"samples": samples[:, :, :-count], "noise_mask": mask[:, :, :-count]},
        )


def h264_round_trip(image: torch.Tensor, crf: int) -> torch.Tensor:
    """One [H, W, 3] image through a one-frame libx264 (yuv420p, preset veryfast) encode at `crf` and back,
    cropped to even sides; crf 0 returns the image untouched."""
    if crf == 0:
        return image
    pixels = (image[: image.shape[0] // 2 * 2, : image.shape[1] // 2 * 2, :3] * 255.0).byte().cpu().numpy()
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=1, options={"crf": str(crf), "preset": "veryfast"})
        stream.height, stream.width = pixels.shape[0], pixels.shape[1]
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(pixels), format="rgb24").reformat(format="yuv420p")
        container.mux(stream.encode(frame))
        container.mux(stream.encode())
    buffer.seek(0)
    with av.open(buffer) as container:
        decoded = next(container.decode(video=0)).to_ndarray(format="rgb24")
    return torch.from_numpy(decoded).to(dtype=image.dtype, device=image.device) / 255.0


class LTXVPreprocess:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "image"
    RETURN_TYPES = ("IMAGE",)
    RETURN_NAMES = ("output_image",)
    DESCRIPTION = "Compresses each image as one H.264 video frame (crf = img_compression; 0 leaves it untouched)."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": ("IMAGE",),
                "img_compression": (
                    "INT",
                    {"default": 35, "min": 0, "max": 100, "tooltip": "Amount of compression to apply on image."},
                ),
            }
        }

    def execute(self, image: torch.Tensor, img_compression: int):
        if not isinstance(image, torch.Tensor) or image.ndim != 4:
            raise ValueError("image: expected an IMAGE [batch, height, width, channels]")
        if not 0 <= int(img_compression) <= 100:
            raise ValueError(f"img_compression: {img_compression} is outside 0..100")
        return (torch.stack([h264_round_trip(frame, int(img_compression)) for frame in image]),)


class LTXVImgToVideoInplace:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    RETURN_TYPES = ("LATENT",)
    RETURN_NAMES = ("latent",)
    DESCRIPTION = (
        "The image (resized to the latent's pixels) encoded by the LTX-2 VAE into the first latent frames, which a "
        "noise mask of 1 - strength keeps."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "vae": ("VAE",),
                "image": ("IMAGE",),
                "latent": ("LATENT",),
                "strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0}),
                "bypass": ("BOOLEAN", {"default": False, "tooltip": "Bypass the conditioning."}),
            }
        }

    async def execute(self, vae: Any, image: torch.Tensor, latent: dict, strength: float, bypass: bool = False):
        from nodes.inputs import require_component
        from nodes.ksampler import call_model_fn
        from nodes.upscale import common_upscale

        if bypass:
            return (latent,)
        vae = require_component(vae, "vae", "vae")
        if vae.arch != "ltx2":
            raise ValueError(f"vae: the LTX-2 video VAE (of an LTX-2 checkpoint) is needed here, got a {vae.arch} VAE")
        samples = _video_samples(_latent(latent, "latent"), "latent")
        batch, _, frames, height, width = samples.shape
        pixels = image
        if image.shape[1] != height * SPATIAL or image.shape[2] != width * SPATIAL:
            moved = image.movedim(-1, 1)
            pixels = common_upscale(moved, width * SPATIAL, height * SPATIAL, "bilinear", "center").movedim(1, -1)
        out = await call_model_fn("vae_encode", vae, "vae", {"pixels": pixels[..., :3].contiguous()}, {})
        encoded = out["latent"]
        samples = samples.clone()  # ComfyUI writes into the input latent; here the input stays as it was
        samples[:, :, : encoded.shape[2]] = encoded
        mask = torch.ones((batch, 1, frames, 1, 1), dtype=torch.float32)
        mask[:, :, : encoded.shape[2]] = 1.0 - strength
        return ({"samples": samples, "noise_mask": mask},)


def _keyframe_idxs(conditioning: list) -> torch.Tensor | None:
    """The first keyframe_idxs of a conditioning's entries, as ComfyUI's conditioning_get_any_value reads it."""
    return next((v["keyframe_idxs"] for _, v in conditioning if v.get("keyframe_idxs") is not None), None)


def guide_pixel_coords(frames: int, height: int, width: int, batch: int, frame_idx: int) -> torch.Tensor:
    """The positions LTX-2 gives a guide latent's tokens [batch, 3, tokens, 2]: each token's frame, row and column
    start and end (one latent step on) in pixels (x 8, 32, 32), tokens in frame-row-column order; a guide placed at
    frame 0 gets the causal first frame (its frame axis shifted back by 7, clamped at 0); then frame_idx is added
    to the frame axis. Integers, as ComfyUI's."""
    grid = torch.stack(torch.meshgrid(torch.arange(frames), torch.arange(height), torch.arange(width), indexing="ij"))
    start = grid.reshape(3, -1)
    coords = torch.stack([start, start + 1], dim=-1) * torch.tensor([TEMPORAL, SPATIAL, SPATIAL]).view(3, 1, 1)
    coords = coords.unsqueeze(0).repeat(batch, 1, 1, 1)
    if frame_idx == 0:
        coords[:, 0] = (coords[:, 0] + 1 - TEMPORAL).clamp(min=0)
    coords[:, 0] += frame_idx
    return coords


class LTXVAddGuide:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    DESCRIPTION = (
        "Appends the image (or 8n+1 video frames), encoded by the LTX-2 VAE at the latent's size, to the video "
        "latent as guide frames kept by a noise mask of 1 - strength; both conditionings get the guide tokens' "
        "positions at frame_idx (keyframe_idxs). LTXV Crop Guides removes the guide frames after sampling."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "positive": ("CONDITIONING",),
                "negative": ("CONDITIONING",),
                "vae": ("VAE",),
                "latent": ("LATENT",),
                "image": (
                    "IMAGE",
                    {
                        "tooltip": "Image or video to condition the latent video on. Must be 8*n + 1 frames. If "
                        "the video is not 8*n + 1 frames, it will be cropped to the nearest 8*n + 1 frames."
                    },
                ),
                "frame_idx": (
                    "INT",
                    {
                        "default": 0,
                        "min": -9999,
                        "max": 9999,
                        "tooltip": "Frame index to start the conditioning at. For single-frame images or videos "
                        "with 1-8 frames, any frame_idx value is acceptable. For videos with 9+ frames, frame_idx "
                        "must be divisible by 8, otherwise it will be rounded down to the nearest multiple of 8. "
                        "Negative values are counted from the end of the video.",
                    },
                ),
                "strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0, "step": 0.01}),
            },
            # ComfyUI's newest LTXVAddGuide has these two; the template workflows link iclora_parameters
            "optional": {
                "attention_mask": (
                    "MASK",
                    {"tooltip": "A pixel mask weighting the guide's influence per region (not supported here)."},
                ),
                "iclora_parameters": (
                    "IC_LORA_PARAMETERS",
                    {"tooltip": "From Get IC-LoRA Parameters: how the connected IC-LoRA wants its guides prepared."},
                ),
            },
        }

    async def execute(
        self,
        positive: list,
        negative: list,
        vae: Any,
        latent: dict,
        image,
        frame_idx: int,
        strength,
        attention_mask: torch.Tensor | None = None,
        iclora_parameters: dict | None = None,
    ):
        from nodes.inputs import require_component
        from nodes.ksampler import call_model_fn
        from nodes.library.ltxv_iclora import downscale_factor
        from nodes.upscale import common_upscale

        positive, negative = require(positive, "positive"), require(negative, "negative")
        if attention_mask is not None:
            raise NotImplementedError("attention_mask: per-region guide attention is not supported yet")
        factor = downscale_factor((iclora_parameters or {}).get("reference_downscale_factor", 1))
        if factor > 1:
            # ComfyUI then encodes the guide at 1/factor size and dilates it onto the latent grid, which the
            # LTX-2 transformer here does not yet read (guide tokens masked out of attention)
            raise NotImplementedError(
                f"iclora_parameters: an IC-LoRA with reference_downscale_factor {factor} is not supported yet "
                "(only 1, a guide at the latent's full size)"
            )
        vae = require_component(vae, "vae", "vae")
        if vae.arch != "ltx2":
            raise ValueError(f"vae: the LTX-2 video VAE is needed here, got a {vae.arch} VAE")
        samples = _video_samples(_latent(latent, "latent"), "latent")
        if samples.shape[1] != LATENT_CHANNELS:
            raise ValueError("latent: adding a guide to a combined audio-video latent is not supported (ComfyUI)")
        if not isinstance(image, torch.Tensor) or image.ndim != 4:
            raise ValueError("image: expected an IMAGE [frames, height, width, channels]")
        batch, _, length, height, width = samples.shape
        mask = latent.get("noise_mask")
        mask = torch.ones((batch, 1, length, 1, 1)) if mask is None else mask.clone()
        image = image[: (image.shape[0] - 1) // TEMPORAL * TEMPORAL + 1]  # 8n+1 frames
        pixels = common_upscale(image.movedim(-1, 1), width * SPATIAL, height * SPATIAL, "bilinear", "disabled")
        out = await call_model_fn("vae_encode", vae, "vae", {"pixels": pixels.movedim(1, -1)[..., :3].contiguous()}, {})
        guide = out["latent"]
        frame_idx = self._frame_index(positive, length, image.shape[0], int(frame_idx))
        latent_idx = (frame_idx + TEMPORAL - 1) // TEMPORAL
        if latent_idx + guide.shape[2] > length:
            raise ValueError(
                f"frame_idx: the guide's {guide.shape[2]} latent frames from latent frame {latent_idx} exceed the "
                f"latent's {length}"
            )
        coords = guide_pixel_coords(*guide.shape[2:], guide.shape[0], frame_idx)
        positive, negative = (self._with_keyframes(c, coords) for c in (positive, negative))
        guide_mask = torch.full((mask.shape[0], 1, guide.shape[2], mask.shape[3], mask.shape[4]), 1.0 - strength)
        samples = torch.cat([samples, guide.to(samples.dtype)], dim=2)
        return (positive, negative, {"samples": samples, "noise_mask": torch.cat([mask, guide_mask], dim=2)})

    @staticmethod
    def _frame_index(positive: list, length: int, guide_frames: int, frame_idx: int) -> int:
        """ComfyUI's frame index of the guide: negative counts from the end of the latent's own frames (guides
        already appended left out); a multi-frame guide not at 0 starts on a latent frame's first pixel frame."""
        kf = _keyframe_idxs(positive)
        count = length - (0 if kf is None else int(torch.unique(kf[:, 0, :, 0]).shape[0]))
        if frame_idx < 0:
            frame_idx = max((count - 1) * TEMPORAL + 1 + frame_idx, 0)
        if guide_frames > 1 and frame_idx != 0:
            frame_idx = (frame_idx - 1) // TEMPORAL * TEMPORAL + 1
        return frame_idx

    @staticmethod
    def _with_keyframes(conditioning: list, coords: torch.Tensor) -> list:
        kf = _keyframe_idxs(conditioning)
        return set_values(conditioning, {"keyframe_idxs": coords if kf is None else torch.cat([kf, coords], dim=2)})


NODE_CLASS_MAPPINGS = {
    cls.__name__: cls
    for cls in (
        EmptyLTXVLatentVideo,
        LTXVConcatAVLatent,
        LTXVSeparateAVLatent,
        LTXVCropGuides,
        LTXVPreprocess,
        LTXVImgToVideoInplace,
        LTXVAddGuide,
    )
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
