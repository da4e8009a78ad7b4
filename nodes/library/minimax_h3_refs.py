"""MiniMax H3's reference and guide nodes (today's ComfyUI comfy_extras.nodes_minimax_h3, interface and semantics
read from its newest source): MiniMaxH3ReferenceToVideo (ref2va) and MiniMaxH3AddGuide.

Each reference image is scaled down (never up, aspect kept, sides rounded to multiples of 32) to the generation's
pixel area (`match`) or to a 2048 px short edge (`max`), read by the text encoder before the prompt as
"<Picture i>: " and a vision block (as the first/last frames of nodes.library.minimax_h3), and, given a VAE,
encoded into one latent frame of its own size that the conditioning carries as `minimax_refs`: the transformer
packs those rows between the prompt and the generated audio and video, one rotary time unit each, held at
t = 0.999 like keyframes (nodes.models.minimax_h3). The latent is the empty audio-video latent of the canvas.
Reference videos, their soundtracks and reference audio are refused by name (not supported yet).

MiniMaxH3AddGuide pins an image at any pixel frame of the video (negative indices count from the end): the picture
cover-cropped to the latent's canvas and VAE-encoded into one latent frame, appended to the conditioning's
`minimax_keyframes` as the first/last frames are. Clips (5+ frames) and audio guides are refused by name."""

from __future__ import annotations

import math

import torch

from nodes import MAX_RESOLUTION
from nodes.dynamic_inputs import DynamicSection, autogrow_prefix, group
from nodes.library.ltxv_av import AVLatent
from nodes.library.minimax_h3 import MODULE, empty_av_latent, encode_with_pictures, on_canvas

CANVAS_MULTIPLE = 32
REF_IMAGE_SHORT_EDGE = 2048  # `max`: the reference pipeline's short edge
REFERENCE_IMAGE = "MINIMAX_H3_REFERENCE_IMAGE"  # MiniMaxH3TextEncoderOnlyReference's output: {"image": IMAGE}
GROUPS = {
    "ref_images": autogrow_prefix("ref_image", (f"IMAGE,{REFERENCE_IMAGE}", {}), "ref_image_", 0, 9),
    "ref_videos": autogrow_prefix("ref_video", ("IMAGE", {}), "ref_video_", 0, 3),
    "ref_video_audios": autogrow_prefix("ref_video_audio", ("AUDIO", {}), "ref_video_audio_", 0, 3),
    "ref_audios": autogrow_prefix("ref_audio", ("AUDIO", {}), "ref_audio_", 0, 3),
}


def reference_size(width: int, height: int, canvas_w: int, canvas_h: int, mode: str) -> tuple[int, int]:
    """A reference picture's (width, height): scaled down only, aspect kept, each side rounded to 32."""
    if mode == "match":
        scale = min(1.0, math.sqrt((canvas_w * canvas_h) / (width * height)))
    elif mode == "max":
        scale = min(1.0, REF_IMAGE_SHORT_EDGE / min(width, height))
    else:
        raise ValueError(f"ref_image_size: expected 'match' or 'max', got {mode!r}")

    def side(n: int) -> int:
        return max(CANVAS_MULTIPLE, round(n * scale / CANVAS_MULTIPLE) * CANVAS_MULTIPLE)

    return side(width), side(height)


class MiniMaxH3ReferenceToVideo:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "model/conditioning/minimax"
    RETURN_TYPES = ("CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "LATENT")
    DESCRIPTION = (
        "<Picture i> reference conditioning for MiniMax H3 (reference videos and audio are not supported yet). "
        "Use the same tags when prompting."
    )

    @classmethod
    def INPUT_TYPES(cls):
        size = {"min": 32, "max": MAX_RESOLUTION, "step": 32}
        return {
            "required": {
                "clip": ("CLIP", {}),
                "prompt": ("STRING", {"multiline": True, "dynamicPrompts": True}),
                "width": ("INT", {"default": 1344, **size}),
                "height": ("INT", {"default": 768, **size}),
                "length": ("INT", {"default": 124, "min": 5, "max": 3600, "step": 17}),
                "ref_image_size": ("COMBO", {"default": "match", "multiselect": False, "options": ["match", "max"]}),
            },
            "optional": DynamicSection({"vae": ("VAE", {}), "audio_vae": ("VAE", {}), **GROUPS}),
        }

    async def execute(
        self, clip, prompt: str, width: int, height: int, length: int, ref_image_size: str = "match", **kwargs
    ):
        from nodes.model_nodes import CLIPTextEncode, VAEEncode

        for name in ("ref_videos", "ref_video_audios", "ref_audios"):
            if any(v is not None for v in group(kwargs, name, GROUPS[name]).values()):
                raise ValueError(f"{name}: MiniMax H3 reference videos and audio are not supported yet")
        vae = kwargs.get("vae")
        latent = empty_av_latent(width, height, length)
        pictures, encoded = [], []
        for name, ref in group(kwargs, "ref_images", GROUPS["ref_images"]).items():
            if ref is None:
                continue
            text_only = isinstance(ref, dict)  # a text-encoder-only reference is never VAE-encoded
            image = ref.get("image") if text_only else ref
            if not isinstance(image, torch.Tensor) or image.ndim != 4:
                raise ValueError(f"{name}: expected an IMAGE [B,H,W,C], got {getattr(image, 'shape', image)}")
            tw, th = reference_size(image.shape[2], image.shape[1], int(width), int(height), ref_image_size)
            picture = on_canvas(image, name, tw, th, "disabled")
            pictures.append(picture)
            if vae is not None and not text_only:
                encoded.append(picture)
        if not pictures:
            (positive,) = await CLIPTextEncode().encode(clip, prompt)
            return positive, latent
        positive = await encode_with_pictures(clip, prompt, pictures, "reference images")
        refs = []
        for picture in encoded:
            (out,) = await VAEEncode().encode(vae, picture)
            refs.append({"kind": "image", "latent": out["samples"]})
        if not refs:
            return positive, latent
        return [[c, {**opts, "minimax_refs": refs}] for c, opts in positive], latent


class MiniMaxH3AddGuide:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "model/conditioning/minimax"
    RETURN_TYPES = ("CONDITIONING",)
    RETURN_NAMES = ("positive",)
    DESCRIPTION = (
        "Anchor an image at any frame of a MiniMax H3 video (clips and audio guides are not supported yet). "
        "Chain several nodes to anchor several frames."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "positive": ("CONDITIONING", {}),
                "latent": ("LATENT", {}),
                "frame_idx": ("INT", {"default": 0, "min": -9999, "max": 9999}),
            },
            "optional": {"vae": ("VAE", {}), "audio_vae": ("VAE", {}), "image": ("IMAGE", {}), "audio": ("AUDIO", {})},
        }

    async def execute(self, positive, latent, frame_idx: int, vae=None, audio_vae=None, image=None, audio=None):
        from nodes.model_nodes import VAEEncode
        from nodes.models.minimax_h3_engine import pixel_frames  # the model code loads on first use

        samples = latent.get("samples") if isinstance(latent, dict) else None
        parts = samples.unbind() if isinstance(samples, AVLatent) else ()
        if len(parts) != 2 or parts[0].ndim != 5 or parts[0].shape[1] != 24:
            raise ValueError("latent: MiniMaxH3AddGuide expects a MiniMax H3 AV latent (EmptyMiniMaxH3LatentAV's)")
        if image is None and audio is None:
            raise ValueError("MiniMaxH3AddGuide needs an image or an audio to anchor")
        if audio is not None:
            raise ValueError("audio: MiniMax H3 audio guides are not supported yet")
        if not isinstance(image, torch.Tensor) or image.ndim != 4:
            raise ValueError(f"image: expected an IMAGE [B,H,W,C], got {getattr(image, 'shape', image)}")
        if image.shape[0] >= 5:
            raise ValueError("image: MiniMax H3 guide clips (5 or more frames) are not supported yet")
        if vae is None:
            raise ValueError("vae: anchoring a guide image needs the video VAE")
        video = parts[0]
        frame_count = pixel_frames(video.shape[2])
        index = frame_idx if frame_idx >= 0 else frame_count + frame_idx
        if not 0 <= index < frame_count:
            raise ValueError(f"frame_idx: {frame_idx} is outside the video's {frame_count} frames")
        picture = on_canvas(image, "image", video.shape[4] * 16, video.shape[3] * 16, "center")
        (encoded,) = await VAEEncode().encode(vae, picture)
        keyframe = {"resolved_frame_index": index, "latent": encoded["samples"]}
        # ComfyUI extends the first entry's list and sets it on every entry
        keyframes = [*(positive[0][1].get("minimax_keyframes") or ()), keyframe]
        return ([[c, {**opts, "minimax_keyframes": keyframes}] for c, opts in positive],)


NODE_CLASS_MAPPINGS = {"MiniMaxH3ReferenceToVideo": MiniMaxH3ReferenceToVideo, "MiniMaxH3AddGuide": MiniMaxH3AddGuide}
NODE_DISPLAY_NAME_MAPPINGS = {
    "MiniMaxH3ReferenceToVideo": "MiniMax H3 Reference to Video",
    "MiniMaxH3AddGuide": "Add Guide for MiniMax H3",
}
