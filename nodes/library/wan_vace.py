"""WanVaceToVideo (ComfyUI's comfy_extras.nodes_wan): a Wan 2.1 VACE model's control video, masks and reference
image as conditioning.

The control video is split by its mask into an inactive part (kept where the mask is 0) and a reactive part
(where it is 1), each encoded by the Wan 2.1 VAE: 32 latent channels. The pixel mask is folded 8x8 into 64
channels per latent cell and resampled to the latent frames. A reference image is encoded as one more latent
frame in front (its reactive half the format's zero) with a zero mask; `trim_latent` tells TrimVideoLatent to
cut that frame off after sampling. Each chained node appends its own entry to the lists `vace_frames`,
`vace_mask` and `vace_strength`, as ComfyUI does; nodes.models.wan turns them into the model's input."""

from __future__ import annotations

import torch

from nodes.conditioning import require
from nodes.library.wan import encode_video, fit_frames, latent_frames
from nodes.models.components import WAN21_LATENT
from nodes.video_inputs import video_inputs

VAE_STRIDE = 8


def _fit_length(frames: torch.Tensor, length: int, fill: float) -> torch.Tensor:
    """The first `length` frames, padded at the end with `fill` to `length`."""
    frames = frames[:length]
    if frames.shape[0] < length:
        frames = torch.nn.functional.pad(frames, (0, 0, 0, 0, 0, 0, 0, length - frames.shape[0]), value=fill)
    return frames


def _latent_mask(mask: torch.Tensor, length: int, height: int, width: int) -> torch.Tensor:
    """[length,H,W,1] pixel mask -> [64, latent frames, H/8, W/8]: each 8x8 cell's pixels as channels, the
    frames resampled (nearest-exact) to the latent's."""
    hm, wm = height // VAE_STRIDE, width // VAE_STRIDE
    mask = mask.reshape(length, hm, VAE_STRIDE, wm, VAE_STRIDE).permute(2, 4, 0, 1, 3)
    mask = mask.reshape(VAE_STRIDE * VAE_STRIDE, length, hm, wm)
    size = (latent_frames(length), hm, wm)
    return torch.nn.functional.interpolate(mask.unsqueeze(0), size=size, mode="nearest-exact").squeeze(0)


def _append(conditioning: list, values: dict[str, object]) -> list:
    """Each entry with `values` appended to its lists of the same names (ComfyUI's append=True)."""
    return [[cond, {**opts, **{k: [*opts.get(k, []), v] for k, v in values.items()}}] for cond, opts in conditioning]


class WanVaceToVideo:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_wan"
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    SEARCH_ALIASES = ["video conditioning", "video control"]
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT", "INT")
    RETURN_NAMES = ("positive", "negative", "latent", "trim_latent")
    DESCRIPTION = (
        "Conditions a Wan 2.1 VACE model on a control video (its masked and unmasked parts), control masks and "
        "a reference image; trim_latent is the number of reference frames to cut after sampling."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                **video_inputs(),
                "strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1000.0, "step": 0.01}),
            },
            "optional": {
                "control_video": ("IMAGE", {}),
                "control_masks": ("MASK", {}),
                "reference_image": ("IMAGE", {}),
            },
        }

    async def execute(
        self,
        positive,
        negative,
        vae,
        width: int,
        height: int,
        length: int,
        batch_size: int,
        strength: float,
        control_video: torch.Tensor | None = None,
        control_masks: torch.Tensor | None = None,
        reference_image: torch.Tensor | None = None,
    ):
        positive, negative = require(positive, "positive"), require(negative, "negative")
        if control_video is None:
            video = torch.full((length, height, width, 3), 0.5)
        else:
            video = _fit_length(fit_frames(control_video[:length], width, height), length, 0.5)
        if control_masks is None:
            mask = torch.ones(length, height, width, 1)
        else:
            masks = control_masks.unsqueeze(1) if control_masks.dim() == 3 else control_masks
            fitted = fit_frames(masks[:length].movedim(1, -1), width, height)
            mask = _fit_length(fitted, length, 1.0)
        video = video - 0.5
        inactive = await encode_video(vae, (video * (1 - mask) + 0.5)[..., :3])
        reactive = await encode_video(vae, (video * mask + 0.5)[..., :3])
        frames = torch.cat([inactive, reactive], dim=1)
        latent_mask = _latent_mask(mask, length, height, width)
        trim = 0
        if reference_image is not None:
            ref = await encode_video(vae, fit_frames(reference_image[:1], width, height)[..., :3])
            ref = torch.cat([ref, WAN21_LATENT.process_out(torch.zeros_like(ref))], dim=1)
            frames = torch.cat([ref, frames], dim=2)
            trim = ref.shape[2]
            latent_mask = torch.cat([torch.zeros_like(latent_mask[:, :trim]), latent_mask], dim=1)
        values = {"vace_frames": frames, "vace_mask": latent_mask.unsqueeze(0), "vace_strength": strength}
        latent = torch.zeros(batch_size, 16, latent_mask.shape[1], height // VAE_STRIDE, width // VAE_STRIDE)
        return _append(positive, values), _append(negative, values), {"samples": latent}, trim


NODE_CLASS_MAPPINGS = {"WanVaceToVideo": WanVaceToVideo}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
