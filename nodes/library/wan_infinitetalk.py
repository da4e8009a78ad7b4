"""WanInfiniteTalkToVideo (ComfyUI's comfy_extras/nodes_wan.py, upstream 0.10.0; interface and behaviour read
there, our own code): conditions a Wan 2.1 image-to-video model on one or two speakers' audio through the
MultiTalk / InfiniteTalk patch (nodes.models.wan_multitalk).

- The start image (bilinear, centre crop, grey 0.5 after it) is encoded as Wan's image-to-video concat latent with
  its mask on both conds, as WanImageToVideo does; a CLIP vision output joins both.
- Each speaker's wav2vec 2.0 layers but the first are resampled from 50 to 25 frames a second; with two speakers
  the streams are laid end to end (speaker 1's audio, then speaker 2's, each silent - zeros - in the other's time).
- The audio windows of the clip's frames (from the previous frames' offset when extending) go on the MODEL with
  the patch and the scale; two masks become the speakers' token masks at the latent's 2x2 patch grid.
- The motion latent is the start image's first latent frame, or, when extending, the VAE latent of the last
  `motion_frame_count` previous frames (also the trim_image output: the frames to cut from the decoded clip).
"""

from __future__ import annotations

import torch

from cluster.refs import ModelRef
from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.dynamic_inputs import DYNAMIC_COMBO, DynamicSection
from nodes.infinitetalk import OPTION, InfiniteTalkPatch
from nodes.inputs import require_model, require_ref
from nodes.library.wan import encode_video, fit_frames, grey_clip_from, latent_frames
from nodes.library.wan_s2v import AUDIO_FPS, features_at_rate
from nodes.models.model_patch import WAN_MULTITALK
from nodes.models.wan_multitalk import audio_windows
from nodes.video_inputs import video_length, video_size

VIDEO_FPS = 25  # InfiniteTalk's frame rate: the audio is read at 25 frames a second

MODE = (
    DYNAMIC_COMBO,
    {
        "options": [
            {"key": "single_speaker", "inputs": {"required": {}}},
            {
                "key": "two_speakers",
                "inputs": {
                    "required": {},
                    "optional": {
                        "audio_encoder_output_2": ("AUDIO_ENCODER_OUTPUT", {}),
                        "mask_1": ("MASK", {"tooltip": "Where the first speaker is; needed with two audio inputs."}),
                        "mask_2": ("MASK", {"tooltip": "Where the second speaker is; needed with two audio inputs."}),
                    },
                },
            },
        ]
    },
)


def speaker_features(output: dict) -> torch.Tensor:
    """An AUDIO_ENCODER_OUTPUT's layers past the first at 25 frames a second: [T, layers, width]."""
    layers = torch.stack(list(output["encoded_audio_all_layers"]), dim=0).squeeze(1)[1:]
    return features_at_rate(layers.float(), AUDIO_FPS, VIDEO_FPS).movedim(0, 1)


def end_to_end(streams: list[torch.Tensor]) -> list[torch.Tensor]:
    """Two speakers' streams on one timeline, one after the other, each zero in the other's time."""
    if len(streams) < 2:
        return streams
    total = sum(s.shape[0] for s in streams)
    out, offset = [], 0
    for s in streams:
        full = torch.zeros(total, *s.shape[1:], dtype=s.dtype)
        full[offset : offset + s.shape[0]] = s
        out.append(full)
        offset += s.shape[0]
    return out


def token_masks(mask_1: torch.Tensor, mask_2: torch.Tensor, latent_hw: tuple[int, int]) -> torch.Tensor:
    """[2, tokens of one latent frame]: where each speaker is, at the 2x2 patch grid (nearest)."""
    masks = torch.cat([mask_1.reshape(-1, *mask_1.shape[-2:]), mask_2.reshape(-1, *mask_2.shape[-2:])])
    small = torch.nn.functional.interpolate(
        masks.unsqueeze(0).float(), size=(latent_hw[0] // 2, latent_hw[1] // 2), mode="nearest"
    )[0]
    return (small > 0).reshape(small.shape[0], -1)


class WanInfiniteTalkToVideo:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_wan"
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    RETURN_TYPES = ("MODEL", "CONDITIONING", "CONDITIONING", "LATENT", "INT")
    RETURN_NAMES = ("model", "positive", "negative", "latent", "trim_image")
    DESCRIPTION = "Makes a Wan 2.1 image-to-video model talk along one or two speakers' audio (InfiniteTalk)."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": DynamicSection(
                {
                    "mode": MODE,
                    "model": ("MODEL", {}),
                    "model_patch": ("MODEL_PATCH", {}),
                    "positive": ("CONDITIONING", {}),
                    "negative": ("CONDITIONING", {}),
                    "vae": ("VAE", {}),
                    "width": video_size(832),
                    "height": video_size(480),
                    "length": video_length(81),
                    "audio_encoder_output_1": ("AUDIO_ENCODER_OUTPUT", {}),
                    "motion_frame_count": (
                        "INT",
                        {
                            "default": 9,
                            "min": 1,
                            "max": 33,
                            "step": 1,
                            "tooltip": "How many of the previous frames carry the motion on.",
                        },
                    ),
                    "audio_scale": ("FLOAT", {"default": 1.0, "min": -10.0, "max": 10.0, "step": 0.01}),
                }
            ),
            "optional": {
                "clip_vision_output": ("CLIP_VISION_OUTPUT", {}),
                "start_image": ("IMAGE", {}),
                "previous_frames": ("IMAGE", {}),
            },
        }

    async def execute(
        self,
        mode: str,
        model: ModelRef,
        model_patch: ModelRef,
        positive,
        negative,
        vae,
        width: int,
        height: int,
        length: int,
        audio_encoder_output_1: dict,
        motion_frame_count: int,
        audio_scale: float = 1.0,
        clip_vision_output=None,
        start_image: torch.Tensor | None = None,
        previous_frames: torch.Tensor | None = None,
        **options,
    ):
        model = require_model(model)
        patch = require_ref(model_patch, "model_patch", "model_patch", "MODEL_PATCH")
        if patch.arch != WAN_MULTITALK:
            raise ValueError(f"model_patch: expected InfiniteTalk's audio patch, not a {patch.arch} patch")
        positive, negative = require(positive, "positive"), require(negative, "negative")
        if previous_frames is not None and previous_frames.shape[0] < motion_frame_count:
            raise ValueError("previous_frames: fewer frames than motion_frame_count")
        second = mask_1 = mask_2 = None
        if mode == "two_speakers":
            second = options.get("mode.audio_encoder_output_2")
            mask_1, mask_2 = options.get("mode.mask_1"), options.get("mode.mask_2")
        if second is not None and (mask_1 is None or mask_2 is None):
            raise ValueError("mode: two audio inputs need both speakers' masks")
        if mask_1 is not None and mask_2 is not None and second is None:
            raise ValueError("mode: two masks need the second audio input")
        latent = torch.zeros(1, 16, latent_frames(length), height // 8, width // 8)
        concat = None
        if start_image is not None:
            start = fit_frames(start_image[:length], width, height)
            concat = await encode_video(vae, grey_clip_from(start, length))
            mask = torch.ones(1, 1, latent.shape[2], concat.shape[-2], concat.shape[-1])
            mask[:, :, : latent_frames(start.shape[0])] = 0.0
            extra = {"concat_latent_image": concat, "concat_mask": mask}
            positive, negative = set_values(positive, extra), set_values(negative, extra)
        if clip_vision_output is not None:
            extra = {"clip_vision_output": clip_vision_output}
            positive, negative = set_values(positive, extra), set_values(negative, extra)
        streams = end_to_end([speaker_features(o) for o in (audio_encoder_output_1, second) if o is not None])
        masks = None
        if mask_1 is not None and mask_2 is not None:
            masks = token_masks(mask_1, mask_2, latent.shape[-2:])
        if previous_frames is not None:
            motion_images = fit_frames(previous_frames[-motion_frame_count:], width, height)
            start_frame = previous_frames.shape[0] - motion_frame_count
            motion = await encode_video(vae, motion_images)
            trim = motion_frame_count
        else:
            if concat is None:
                raise ValueError("start_image: InfiniteTalk needs a start image or previous frames")
            start_frame = trim = 0
            motion = concat[:, :, :1]
        first, later = audio_windows(streams, start_frame, start_frame + length)
        entry = InfiniteTalkPatch.of(patch, audio_scale, previous_frames is not None, first, later, motion, masks)
        return model.with_option(OPTION, entry), positive, negative, {"samples": latent}, trim


NODE_CLASS_MAPPINGS = {"WanInfiniteTalkToVideo": WanInfiniteTalkToVideo}
NODE_DISPLAY_NAME_MAPPINGS = {"WanInfiniteTalkToVideo": "WanInfiniteTalkToVideo"}
