"""MiniMax H3's nodes (today's ComfyUI comfy_extras.nodes_minimax_h3, newer than every ComfyUI that runs here;
interface and semantics read from its newest source): EmptyMiniMaxH3LatentAV, the joint latent of a video (24
channels at 1/16, 5k+2 latent frames for 17k+5 pixel frames) and its stereo audio (32 channels, 40 latents a
second) as one LATENT, the two parts side by side as ComfyUI's NestedTensor holds them; MiniMaxH3ImageToVideo,
its text-to-video and first/last-frame-to-video tasks (the prompt encoded by the minimax CLIP, and that latent);
MiniMaxH3SigmaShift, the video and audio flow shifts.

The samplers denoise the video and the audio part together (nodes.ksampler packs them; the audio carried on the
video schedule, nodes.models.minimax_h3_engine). With a first and/or last frame (fl2va), as ComfyUI's node does:
each picture is fitted to the canvas with Lanczos (the first stretched, the last cover-cropped from the centre), read
by the text encoder's vision tower before the prompt ("<Picture i>: " and a vision block,
nodes.models.minimax_h3_text), and encoded by the video VAE into one latent frame that the conditioning pins at
pixel frame 0 or at the last frame (`minimax_keyframes`, packed ahead of the video by the transformer)."""

from __future__ import annotations

import torch

from nodes import MAX_RESOLUTION
from nodes.inputs import require_component, require_model
from nodes.ksampler import call_model_fn
from nodes.library.ltxv_av import AVLatent
from nodes.modelfns.hooks import encodings
from nodes.modelfns.model_options import sampling_config, with_sampling
from nodes.models.minimax_h3_shapes import MINIMAX_SHIFTS, av_latent_shapes, temporal_shape
from nodes.upscale import common_upscale

MODULE = "comfy_extras.nodes_minimax_h3"
_LENGTH_TIP = (
    "Frame count at 24 fps, snapped up to the model's 17k+5 grid (124 = ~5s; trained range is ~124-362, "
    "longer is untested)"
)


def empty_av_latent(width: int, height: int, length: int, batch_size: int = 1) -> dict:
    """The all-zero video and audio latents of a canvas and a length in frames."""
    video, audio = av_latent_shapes(int(width), int(height), int(length), batch_size)
    return {"samples": AVLatent((torch.zeros(video), torch.zeros(audio)))}


class EmptyMiniMaxH3LatentAV:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "model/latent/minimax"
    RETURN_TYPES = ("LATENT",)
    DESCRIPTION = "Joint video+audio latent for MiniMax H3. Duration snaps to the model's 17k+5 frame grid at 24 fps."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "width": ("INT", {"default": 1344, "min": 32, "max": MAX_RESOLUTION, "step": 32}),
                "height": ("INT", {"default": 768, "min": 32, "max": MAX_RESOLUTION, "step": 32}),
                "length": ("INT", {"default": 124, "min": 5, "max": 3600, "step": 17, "tooltip": _LENGTH_TIP}),
            }
        }

    def execute(self, width: int, height: int, length: int):
        return (empty_av_latent(width, height, length),)


class MiniMaxH3ImageToVideo:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "model/conditioning/minimax"
    RETURN_TYPES = ("CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "LATENT")

    @classmethod
    def INPUT_TYPES(cls):
        size = {"min": 32, "max": MAX_RESOLUTION, "step": 32}
        return {
            "required": {
                "clip": ("CLIP",),
                "vae": ("VAE",),
                "prompt": ("STRING", {"multiline": True, "dynamicPrompts": True}),
                "width": ("INT", {"default": 1344, **size}),
                "height": ("INT", {"default": 768, **size}),
                "length": ("INT", {"default": 124, "min": 5, "max": 3600, "step": 17, "tooltip": _LENGTH_TIP}),
            },
            "optional": {"first_frame": ("IMAGE",), "last_frame": ("IMAGE",)},
        }

    async def execute(
        self, clip, vae, prompt: str, width: int, height: int, length: int, first_frame=None, last_frame=None
    ):
        from nodes.model_nodes import CLIPTextEncode, VAEEncode

        latent = empty_av_latent(width, height, length)
        frame_count = temporal_shape(int(length))[0]
        # ComfyUI: the first frame is the geometry anchor (stretched), the last a follower (cover-cropped)
        keyframes = [
            (on_canvas(image, name, width, height, crop), frame)
            for name, image, crop, frame in (
                ("first_frame", first_frame, "disabled", 0),
                ("last_frame", last_frame, "center", frame_count - 1),
            )
            if image is not None
        ]
        if not keyframes:
            (positive,) = await CLIPTextEncode().encode(clip, prompt)
            return positive, latent
        positive = await encode_with_pictures(clip, prompt, [picture for picture, _ in keyframes])
        pinned = []
        for picture, frame in keyframes:
            (encoded,) = await VAEEncode().encode(vae, picture)
            pinned.append({"resolved_frame_index": frame, "latent": encoded["samples"]})
        return [[c, {**opts, "minimax_keyframes": pinned}] for c, opts in positive], latent


def on_canvas(image, name: str, width: int, height: int, crop: str) -> torch.Tensor:
    """The batch's first picture, RGB, Lanczos-resized to the canvas (ComfyUI's _resize)."""
    if not isinstance(image, torch.Tensor) or image.ndim != 4 or image.shape[-1] < 3 or 0 in image.shape[:3]:
        raise ValueError(f"{name}: expected an IMAGE [B,H,W,C] with RGB channels, got {getattr(image, 'shape', image)}")
    samples = image[:1, :, :, :3].movedim(-1, 1)
    return common_upscale(samples, int(width), int(height), "lanczos", crop).movedim(1, -1)


async def encode_with_pictures(
    clip, prompt: str, pictures: list[torch.Tensor], what: str = "first/last frames"
) -> list:
    """CONDITIONING of `prompt` after the pictures' labels and vision blocks, with ComfyUI's per-row modality tags
    (`minimax_token_tags`)."""
    clip = require_component(clip, "text_encoder", "clip")
    if clip.arch != "minimax_h3":
        raise ValueError(
            f"clip: MiniMax H3's {what} need its text encoder (CLIPLoader type minimax), got a {clip.arch} CLIP"
        )
    inputs = {f"image{i}": picture for i, picture in enumerate(pictures)}
    params = {"text": prompt, "images": len(pictures)}
    conditioning = []
    for ref, extra in encodings(clip):
        out = await call_model_fn("text_encode", ref, "clip", inputs, params)
        tags = {"minimax_token_tags": out["token_tags"]}
        conditioning.append([out["cond"], {"pooled_output": out.get("pooled"), **tags, **extra}])
    return conditioning


class MiniMaxH3SigmaShift:
    """The sampler samples at the video shift; the transformer maps each sigma back to the base grid with it and
    on to the audio stream's schedule with the audio shift (ComfyUI hands both to the model)."""

    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "model/patch/minimax"
    RETURN_TYPES = ("MODEL",)
    DESCRIPTION = "Set the video/audio flow shifts."
    SEARCH_ALIASES = ["sigma shift", "minimax shift"]

    @classmethod
    def INPUT_TYPES(cls):
        shift = {"min": 0.01, "max": 100.0, "step": 0.01}
        return {
            "required": {
                "model": ("MODEL",),
                "shift_video": ("FLOAT", {"default": 12.0, **shift}),
                "shift_audio": ("FLOAT", {"default": 3.0, **shift}),
            }
        }

    def execute(self, model, shift_video: float, shift_audio: float):
        model = require_model(model)
        config = {
            "kind": "flow",
            "prediction": "const",
            "shift": float(shift_video),
            "multiplier": 1000,
            MINIMAX_SHIFTS[0]: float(shift_video),
            MINIMAX_SHIFTS[1]: float(shift_audio),
        }
        noise_scale = sampling_config(model).get("noise_scale")
        if noise_scale is not None:  # kept, as ComfyUI's set_noise_scale
            config["noise_scale"] = noise_scale
        return (with_sampling(model, config),)


NODE_CLASS_MAPPINGS = {
    cls.__name__: cls for cls in (EmptyMiniMaxH3LatentAV, MiniMaxH3ImageToVideo, MiniMaxH3SigmaShift)
}
NODE_DISPLAY_NAME_MAPPINGS = {
    "EmptyMiniMaxH3LatentAV": "Empty MiniMax H3 AV Latent",
    "MiniMaxH3ImageToVideo": "MiniMax H3 Image to Video",
    "MiniMaxH3SigmaShift": "ModelSamplingMiniMaxH3",
}
