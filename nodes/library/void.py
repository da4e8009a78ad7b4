"""VOID video inpainting's nodes (ComfyUI's comfy_extras.nodes_void, newer than every ComfyUI that runs here;
written from its definition): VOIDSampler, VOIDWarpedNoiseSource, VOIDQuadmaskPreprocess, VOIDInpaintConditioning,
VOIDWarpedNoise and OpticalFlowLoader.

VOID (Netflix's object-and-interaction removal on CogVideoX-Fun V1.5) samples with its own DDIM from unscaled noise
(nodes.sampling.samplers_void); its second pass starts from noise warped along the first pass's optical flow, which
VOIDWarpedNoiseSource hands to SamplerCustomAdvanced as its NOISE. VOIDInpaintConditioning puts the VAE latents of
the kept-region mask and of the masked video on both conditionings (32 channels: 16 of the mask, 16 of the video) and
gives the empty 16-channel latent; lengths whose latent has an odd frame count are cut to the next even one
(CogVideoX-Fun V1.5 patches two latent frames at once). VOIDWarpedNoise warps Gaussian noise along RAFT-large's
optical flow between the frames (nodes.models.void_noise, nodes.models.raft); it runs in the node's own process
(RAFT is 5M parameters), and draws its noise from a fixed seed (ComfyUI's draws from the process's global
generator, whatever state it is in).
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F

from nodes import MAX_RESOLUTION
from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.inputs import require_component
from nodes.ksampler import PresetNoise, SamplerChoice, call_model_fn
from nodes.loaders import make_ref, model_file, model_files
from nodes.model_nodes import crop_to_multiple
from nodes.upscale import common_upscale

log = logging.getLogger(__name__)

MODULE = "comfy_extras.nodes_void"
TEMPORAL_COMPRESSION = 4  # pixel frames per latent frame (the first stands alone)
PATCH_FRAMES = 2  # latent frames per patch of CogVideoX-Fun V1.5


def void_length(length: int) -> int:
    """`length` cut so that its latent frame count (1 + (length - 1) // 4) is even: 49 -> 45 (at least 2 latent
    frames, 5 pixel frames)."""
    frames = (length - 1) // TEMPORAL_COMPRESSION + 1
    if frames % PATCH_FRAMES == 0:
        return length
    frames = max(PATCH_FRAMES, frames - frames % PATCH_FRAMES)
    return (frames - 1) * TEMPORAL_COMPRESSION + 1


def _frames_at(images: torch.Tensor, width: int, height: int) -> torch.Tensor:
    return common_upscale(images.movedim(-1, 1), width, height, "bilinear", "center").movedim(1, -1)


def _sizes() -> dict:
    return {
        "width": ("INT", {"default": 672, "min": 16, "max": MAX_RESOLUTION, "step": 8}),
        "height": ("INT", {"default": 384, "min": 16, "max": MAX_RESOLUTION, "step": 8}),
    }


class VOIDSampler:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "sampling/samplers"
    DESCRIPTION = (
        "VOID's DDIM: the deterministic scheduler the VOID inpainting models were trained with, starting from the "
        "noise as drawn (no sigma scaling). For SamplerCustom / SamplerCustomAdvanced with RandomNoise or "
        "VOIDWarpedNoiseSource."
    )
    RETURN_TYPES = ("SAMPLER",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def execute(self):
        return (SamplerChoice("void_ddim"),)


class VOIDWarpedNoiseSource:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "sampling/noise"
    DESCRIPTION = "A latent (VOIDWarpedNoise's warped noise) as the NOISE a custom sampler starts from."
    RETURN_TYPES = ("NOISE",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"warped_noise": ("LATENT", {"tooltip": "The noise latent, used as it is."})}}

    def execute(self, warped_noise):
        samples = warped_noise["samples"]
        # ComfyUI's source gives its tensor whatever latent it samples, on the CPU, with seed 0
        return (PresetNoise(0, True, samples.detach().to("cpu", copy=True)),)


class VOIDQuadmaskPreprocess:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "image/mask"
    DESCRIPTION = (
        "A VOID quadmask video to its four levels, inverted to [0, 1]: 0 (object to remove) -> 1, 63 (object and "
        "affected) -> 0.75, 127 (affected) -> 0.5, 255 (keep) -> 0."
    )
    RETURN_TYPES = ("MASK",)
    RETURN_NAMES = ("quadmask",)

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "mask": ("MASK", {}),
                "dilate_width": (
                    "INT",
                    {"default": 0, "min": 0, "max": 50, "step": 1, "tooltip": "Grows the removed region by this."},
                ),
            }
        }

    def execute(self, mask, dilate_width=0):
        m = mask.clone()
        if m.max() <= 1.0:  # a 0..1 mask is read on the 0..255 scale the levels are defined on
            m = m * 255.0
        if dilate_width > 0 and m.dim() >= 3:
            removed = (m < 128).float()
            flat = removed.unsqueeze(1) if removed.dim() == 3 else removed
            grown = F.max_pool2d(flat, 2 * dilate_width + 1, stride=1, padding=dilate_width)
            grown = grown.squeeze(1) if grown.dim() == 4 else grown
            m = torch.where(grown > 0.5, torch.zeros_like(m), m)
        levels = torch.full_like(m, 255.0)
        levels = torch.where(m <= 191, torch.full_like(m, 127.0), levels)
        levels = torch.where(m <= 95, torch.full_like(m, 63.0), levels)
        levels = torch.where(m <= 31, torch.zeros_like(m), levels)
        return ((255.0 - levels) / 255.0,)


class VOIDInpaintConditioning:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    DESCRIPTION = (
        "VOID's inpainting conditioning: the kept-region mask and the masked video through the VAE, 32 channels on "
        "both conditionings, and the empty latent of the video's size."
    )
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "positive": ("CONDITIONING", {}),
                "negative": ("CONDITIONING", {}),
                "vae": ("VAE", {}),
                "video": ("IMAGE", {"tooltip": "The video to inpaint [T, H, W, 3]."}),
                "quadmask": ("MASK", {"tooltip": "Where to remove, per frame [T, H, W] (1 remove, 0 keep)."}),
                **_sizes(),
                "length": (
                    "INT",
                    {
                        "default": 45,
                        "min": 1,
                        "max": MAX_RESOLUTION,
                        "step": 1,
                        "tooltip": "Frames to use; cut so the latent has an even frame count (49 -> 45).",
                    },
                ),
                "batch_size": ("INT", {"default": 1, "min": 1, "max": 64}),
            }
        }

    async def execute(self, positive, negative, vae, video, quadmask, width, height, length, batch_size):
        positive, negative = require(positive, "positive"), require(negative, "negative")
        vae = require_component(vae, "vae", "vae")
        cut = void_length(length)
        if cut != length:
            log.warning("VOIDInpaintConditioning: length %d cut to %d (an even number of latent frames)", length, cut)
        latent_frames = (cut - 1) // TEMPORAL_COMPRESSION + 1
        frames = _frames_at(video[:cut], width, height)
        mask = quadmask[:cut]
        mask = _frames_at(mask.unsqueeze(-1) if mask.dim() == 3 else mask, width, height)
        mask = mask.expand(-1, -1, -1, 3) if mask.shape[-1] == 1 else mask
        keep = 1.0 - mask
        mask_latent = _frames_match(await _encode_video(vae, keep), latent_frames)
        video_latent = _frames_match(await _encode_video(vae, frames[..., :3] * keep), latent_frames)
        # the model scales each 16-channel half itself (its latent format), so the raw latents go on
        concat = torch.cat([mask_latent, video_latent], dim=1)
        values = {"concat_latent_image": concat}
        latent = torch.zeros(batch_size, 16, latent_frames, height // 8, width // 8)
        return set_values(positive, values), set_values(negative, values), {"samples": latent}


async def _encode_video(vae, frames: torch.Tensor) -> torch.Tensor:
    """The frames [T,H,W,3] as one video through a video VAE (cropped to whole 8-pixel blocks, as ComfyUI's)."""
    pixels = crop_to_multiple(frames, 8).contiguous()
    return (await call_model_fn("vae_encode", vae, "vae", {"pixels": pixels}, {"video": True}))["latent"]


def _frames_match(latent: torch.Tensor, frames: int) -> torch.Tensor:
    """A [B,C,T,H,W] latent cut to `frames`, or padded with copies of its last frame."""
    if latent.shape[2] >= frames:
        return latent[:, :, :frames]
    return torch.cat([latent, latent[:, :, -1:].repeat(1, 1, frames - latent.shape[2], 1, 1)], dim=2)


OPTICAL_FLOW = "OPTICAL_FLOW"
WARP_SEED = 0  # VOIDWarpedNoise's noise generator (a fixed seed: the same video gives the same noise)


class OpticalFlowLoader:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "loaders"
    DESCRIPTION = "Loads an optical flow model from the optical_flow folder: torchvision's RAFT-large checkpoint."
    RETURN_TYPES = (OPTICAL_FLOW,)

    @classmethod
    def INPUT_TYPES(cls):
        tip = "The RAFT-large file (raft_large_C_T_SKHT_V2, as .safetensors or .pth) in the optical_flow folder."
        options = {"multiselect": False, "options": model_files("optical_flow"), "tooltip": tip}
        return {"required": {"model_name": ("COMBO", options)}}

    def execute(self, model_name):
        from nodes.models.raft import is_raft

        path = model_file("optical_flow", model_name, "model_name")
        if not is_raft(_read(path)):
            raise ValueError(f"model_name: {model_name!r} is not a torchvision RAFT-large checkpoint")
        return (make_ref("optical_flow", "raft_large", [path]),)


def _read(path) -> dict:
    if str(path).endswith(".safetensors"):
        from nodes.models.safetensors_io import load_state_dict

        return load_state_dict(path)
    return torch.load(path, map_location="cpu", weights_only=True)


class VOIDWarpedNoise:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "latent/video"
    DESCRIPTION = (
        "Noise for VOID's second pass that moves with the first pass's video: Gaussian noise warped along the "
        "optical flow between its frames, one latent frame per 4 video frames."
    )
    RETURN_TYPES = ("LATENT",)
    RETURN_NAMES = ("warped_noise",)

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "optical_flow": (OPTICAL_FLOW, {"tooltip": "RAFT-large from OpticalFlowLoader."}),
                "video": ("IMAGE", {"tooltip": "The first pass's frames [T, H, W, 3]."}),
                **_sizes(),
                "length": (
                    "INT",
                    {
                        "default": 45,
                        "min": 1,
                        "max": MAX_RESOLUTION,
                        "step": 1,
                        "tooltip": "Frames to use; cut so the latent has an even frame count (49 -> 45).",
                    },
                ),
                "batch_size": ("INT", {"default": 1, "min": 1, "max": 64}),
            }
        }

    def execute(self, optical_flow, video, width, height, length, batch_size):
        from nodes.models.raft import load_raft

        cut = void_length(length)
        if cut != length:
            log.warning("VOIDWarpedNoise: length %d cut to %d (an even number of latent frames)", length, cut)
        raft = load_raft(_read(optical_flow.sources[0]))
        frames = (_frames_at(video[:cut], width, height).clamp(0, 1) * 255).to(torch.uint8)
        samples = warped_latent(frames, lambda a, b: raft_flow(raft, a, b), (cut - 1) // TEMPORAL_COMPRESSION + 1)
        return ({"samples": samples.repeat(batch_size, 1, 1, 1, 1)},)


def raft_flow(raft, previous: torch.Tensor, current: torch.Tensor) -> torch.Tensor:
    """RAFT's flow [2, h, w] from `previous` to `current` (CHW in [0, 1]; sides cut to multiples of 8 for RAFT,
    bilinearly, and the flow brought back to their size)."""
    h, w = previous.shape[-2:]
    size = (h // 8 * 8, w // 8 * 8)
    pair = [
        F.interpolate(x[None], size=size, mode="bilinear") if size != (h, w) else x[None] for x in (previous, current)
    ]
    with torch.no_grad():
        flow = raft(pair[0] * 2 - 1, pair[1] * 2 - 1)[0]
    return F.interpolate(flow[None], size=(h, w), mode="bilinear")[0] if size != (h, w) else flow


def warped_latent(frames: torch.Tensor, flow_between, latent_frames: int) -> torch.Tensor:
    """The warped noise of the uint8 video `frames` [T, H, W, 3] as a latent [1, 16, latent_frames, H/8, W/8]:
    evenly spaced frames of the per-frame noise (indices rounded down, as ComfyUI's), resized if its size differs."""
    from nodes.models.void_noise import warped_noise

    height, width = frames.shape[1:3]
    with torch.no_grad():
        noise = warped_noise(frames, flow_between, torch.Generator().manual_seed(WARP_SEED))  # [T, h, w, 16]
    if noise.shape[0] != latent_frames:
        noise = noise[torch.linspace(0, noise.shape[0] - 1, latent_frames).long()]
    if noise.shape[1:3] != (height // 8, width // 8):
        noise = F.interpolate(noise.permute(0, 3, 1, 2), size=(height // 8, width // 8), mode="bilinear")
        noise = noise.permute(0, 2, 3, 1)
    return noise.permute(3, 0, 1, 2).unsqueeze(0).contiguous()


NODE_CLASS_MAPPINGS = {
    "OpticalFlowLoader": OpticalFlowLoader,
    "VOIDWarpedNoise": VOIDWarpedNoise,
    "VOIDSampler": VOIDSampler,
    "VOIDWarpedNoiseSource": VOIDWarpedNoiseSource,
    "VOIDQuadmaskPreprocess": VOIDQuadmaskPreprocess,
    "VOIDInpaintConditioning": VOIDInpaintConditioning,
}
NODE_DISPLAY_NAME_MAPPINGS = {
    "VOIDQuadmaskPreprocess": "VOID Quadmask Preprocessor",
    "OpticalFlowLoader": "Load Optical Flow Model",
}
