"""MiniMax H3's nodes (today's ComfyUI comfy_extras.nodes_minimax_h3, newer than every ComfyUI that runs here;
interface and semantics read from its newest source): EmptyMiniMaxH3LatentAV, the joint latent of a video (24
channels at 1/16, 5k+2 latent frames for 17k+5 pixel frames) and its stereo audio (32 channels, 40 latents a
second) as one LATENT, the two parts side by side as ComfyUI's NestedTensor holds them; MiniMaxH3ImageToVideo,
its text-to-video task (the prompt encoded by the minimax CLIP, and that latent); MiniMaxH3SigmaShift, the
video and audio flow shifts.

The samplers denoise the video and the audio part together (nodes.ksampler packs them; the audio carried on the
video schedule, nodes.models.minimax_h3_engine). First and last frames (fl2va) are refused: the text encoder does
not read images yet."""

from __future__ import annotations

import torch

from nodes import MAX_RESOLUTION
from nodes.inputs import require_model
from nodes.library.ltxv_av import AVLatent
from nodes.modelfns.model_options import sampling_config, with_sampling
from nodes.models.minimax_h3_shapes import MINIMAX_SHIFTS, av_latent_shapes

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
        from nodes.model_nodes import CLIPTextEncode

        for name, image in (("first_frame", first_frame), ("last_frame", last_frame)):
            if image is not None:
                raise ValueError(
                    f"{name}: MiniMax H3 first/last-frame video (fl2va) is not supported yet (its text "
                    "encoder would read the image through Qwen3-VL's vision tower); leave it "
                    "unconnected for text-to-video"
                )
        (positive,) = await CLIPTextEncode().encode(clip, prompt)
        return positive, empty_av_latent(width, height, length)


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
