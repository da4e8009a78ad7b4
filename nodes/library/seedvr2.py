"""SeedVR2's image and latent nodes (today's ComfyUI comfy_extras.nodes_seedvr, newer than every ComfyUI that runs
here; interface and semantics read from its newest source, checked by tests/nodes/test_seedvr2_nodes.py against
that source's code run on the same inputs):

- SeedVR2Preprocess: frames (a 4-D IMAGE is one clip, a 5-D one a batch of clips) clamped to [0, 1], alpha
  dropped, padded with black at the right and bottom to multiples of 16 and with copies of the last frame to 4n+1
  frames (the VAE's 8x spatial and 4x temporal steps);
- SeedVR2PostProcessing: the decoded frames cut back to the original resized frames' clip length and size, their
  colours matched to them (nodes.seedvr2_color), the original's alpha re-applied, even sides;
- SeedVR2TemporalChunk / SeedVR2TemporalMerge: a long clip's latent split into overlapping chunks of 4n+1 pixel
  frames that are sampled one by one (a list output), then joined with a cosine crossfade over each overlap;
- SeedVR2Conditioning: the transformer file's own text embeddings (positive 58 x 5120, negative 64 x 5120) as the
  two conditionings, each carrying `condition`: the latent to upscale with a ones channel (17 channels), which the
  model joins to its input (nodes.models.seedvr2_model)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from nodes.dynamic_inputs import combo_inputs, dynamic_combo
from nodes.inputs import require_component
from nodes.seedvr2_color import TRANSFERS

MODULE = "comfy_extras.nodes_seedvr"
LATENT_CHANNELS = 16
SPATIAL, TEMPORAL = 8, 4
PAD_MULTIPLE = 16
# ComfyUI's law for the auto chunk size: a sampled latent frame costs 0.55 GiB per megapixel of pixel frame, beyond
# 8.5 GiB reserved and four times the measured 0.55 GiB spread
CHUNK_GIB_PER_MPX_FRAME, CHUNK_RESERVED_GIB, CHUNK_SPREAD_GIB = 0.55, 8.5, 4 * 0.55
OVERLAP = ("INT", {"default": 0, "min": 0, "max": 16384})


def _clips(images: torch.Tensor, node: str) -> tuple[torch.Tensor, bool]:
    """[clips, frames, H, W, C] and whether the input was one clip of frames [frames, H, W, C]."""
    if not isinstance(images, torch.Tensor) or images.ndim not in (4, 5):
        shape = tuple(images.shape) if isinstance(images, torch.Tensor) else type(images).__name__
        raise ValueError(f"{node}: expected a 4-D or 5-D IMAGE tensor, got {shape}")
    return (images.unsqueeze(0), True) if images.ndim == 4 else (images, False)


def pad_for_vae(images: torch.Tensor) -> torch.Tensor:
    clips, _ = _clips(images, "SeedVR2Preprocess")
    if min(clips.shape[2], clips.shape[3]) < 2:
        raise ValueError(f"SeedVR2Preprocess: the shorter side must be at least 2 pixels, got {tuple(images.shape)}")
    clips = clips[..., :3].clamp(0.0, 1.0)
    height, width = clips.shape[2], clips.shape[3]
    clips = F.pad(clips, (0, 0, 0, -width % PAD_MULTIPLE, 0, -height % PAD_MULTIPLE))
    frames = clips.shape[1]
    # one frame stays one frame; otherwise at least five, and 4n+1
    target = 1 if frames == 1 else max(5, frames + (-(frames - 1) % TEMPORAL))
    if target > frames:
        clips = torch.cat([clips, clips[:, -1:].expand(-1, target - frames, -1, -1, -1)], dim=1)
    return clips.contiguous()


def _resize_frames(clips: torch.Tensor, height: int, width: int) -> torch.Tensor:
    if clips.shape[2:4] == (height, width):
        return clips
    flat = clips.flatten(0, 1).movedim(-1, 1)
    flat = F.interpolate(flat, size=(height, width), mode="bicubic", align_corners=False, antialias=True)
    return flat.movedim(1, -1).unflatten(0, clips.shape[:2])


def postprocess(images: torch.Tensor, original: torch.Tensor, method: str) -> torch.Tensor:
    if method not in (*TRANSFERS, "none"):
        raise ValueError(f"SeedVR2PostProcessing: unknown color_correction_method {method!r}")
    alpha = original[..., 3:4] if original.shape[-1] == 4 else None
    decoded, one_clip = _clips(images, "SeedVR2PostProcessing")
    reference, _ = _clips(original[..., :3], "SeedVR2PostProcessing")
    clips = reference.shape[0]
    # a batch of clips decoded as one run of frames: split back into the clips when each is long enough
    if decoded.shape[0] == 1 and decoded.shape[1] % clips == 0 and decoded.shape[1] // clips >= reference.shape[1]:
        decoded = decoded.reshape(clips, decoded.shape[1] // clips, *decoded.shape[2:])
    b, t = min(decoded.shape[0], clips), min(decoded.shape[1], reference.shape[1])
    height, width = min(decoded.shape[2], reference.shape[2]), min(decoded.shape[3], reference.shape[3])
    out = decoded[:b, :t, :height, :width]
    if method != "none":
        target = _resize_frames(reference[:b, :t], height, width)
        frames = (out * 2.0 - 1.0).flatten(0, 1).movedim(-1, 1)
        matched = TRANSFERS[method](frames, (target * 2.0 - 1.0).flatten(0, 1).movedim(-1, 1))
        out = ((matched.movedim(1, -1).unflatten(0, (b, t)) + 1.0) / 2.0).clamp(0.0, 1.0)
    if alpha is not None:
        alpha, _ = _clips(alpha, "SeedVR2PostProcessing")
        out = torch.cat([out, alpha[: out.shape[0], : out.shape[1], : out.shape[2], : out.shape[3]].to(out)], dim=-1)
    out = out[:, :, : out.shape[2] // 2 * 2, : out.shape[3] // 2 * 2]
    return out.flatten(0, 1) if one_clip else out


def _video_latent(latent: Any, node: str) -> torch.Tensor:
    samples = latent.get("samples") if isinstance(latent, dict) else None
    if not isinstance(samples, torch.Tensor) or samples.ndim != 5 or samples.shape[1] != LATENT_CHANNELS:
        shape = tuple(samples.shape) if isinstance(samples, torch.Tensor) else type(samples).__name__
        raise ValueError(
            f"{node}: expected a SeedVR2 video latent [batch, {LATENT_CHANNELS}, frames, H, W], got {shape}"
        )
    return samples


def _free_gib() -> float:
    if torch.cuda.is_available():
        return torch.cuda.mem_get_info()[0] / 1024**3
    import psutil

    return psutil.virtual_memory().available / 1024**3


def auto_frames_per_chunk(samples: torch.Tensor) -> int:
    """The largest 4n+1 chunk ComfyUI's memory law lets the free memory of the sampling device hold."""
    megapixels = samples.shape[0] * samples.shape[3] * samples.shape[4] * SPATIAL**2 / 1e6
    budget = _free_gib() - CHUNK_RESERVED_GIB - CHUNK_SPREAD_GIB
    latent_frames = max(1, int(budget / (CHUNK_GIB_PER_MPX_FRAME * megapixels)))
    return min(TEMPORAL * (latent_frames - 1) + 1, TEMPORAL * (samples.shape[2] - 1) + 1)


def split_chunks(latent: dict, temporal_overlap: int, frames_per_chunk: int) -> tuple[list[dict], int]:
    samples = _video_latent(latent, "SeedVR2TemporalChunk")
    if temporal_overlap < 0:
        raise ValueError(f"SeedVR2TemporalChunk: temporal_overlap must be >= 0, got {temporal_overlap}")
    if frames_per_chunk < 1 or (frames_per_chunk - 1) % TEMPORAL:
        raise ValueError(f"SeedVR2TemporalChunk: frames_per_chunk must be 4n+1 (1, 5, 9, ...), got {frames_per_chunk}")
    frames = samples.shape[2]
    if TEMPORAL * (frames - 1) + 1 <= frames_per_chunk:
        return [latent], 0
    length = (frames_per_chunk - 1) // TEMPORAL + 1
    overlap = min(temporal_overlap, length - 1)
    chunks = []
    for start in range(0, frames, length - overlap):
        chunks.append({**latent, "samples": samples[:, :, start : start + length].contiguous()})
        if start + length >= frames:
            break
    return chunks, overlap


def crossfade_weights(n: int, like: torch.Tensor) -> torch.Tensor:
    """The earlier chunk's weights over an overlap of n frames: 1 over the first third, a half cosine down over the
    middle third, 0 over the last (the later chunk has 1 minus these)."""
    ramp = torch.linspace(0.0, 1.0, steps=n, device=like.device, dtype=like.dtype)
    return 0.5 + 0.5 * torch.cos(torch.pi * ((ramp - 1.0 / 3.0) * 3.0).clamp(0.0, 1.0))


def merge_chunks(latents: list[dict], temporal_overlap: int) -> dict:
    if temporal_overlap < 0:
        raise ValueError(f"SeedVR2TemporalMerge: temporal_overlap must be >= 0, got {temporal_overlap}")
    if not latents:
        raise ValueError("SeedVR2TemporalMerge: no latents to merge")
    chunks = [_video_latent(latent, "SeedVR2TemporalMerge") for latent in latents]
    first = chunks[0]
    for i, chunk in enumerate(chunks[1:], start=1):
        if chunk.shape[:2] != first.shape[:2] or chunk.shape[3:] != first.shape[3:]:
            raise ValueError(
                f"SeedVR2TemporalMerge: chunk {i} {tuple(chunk.shape)} differs from chunk 0 {tuple(first.shape)} "
                "outside the frame axis"
            )
        if i < len(chunks) - 1 and chunk.shape[2] != first.shape[2]:
            raise ValueError(
                f"SeedVR2TemporalMerge: chunk {i} has {chunk.shape[2]} frames, chunk 0 {first.shape[2]}; "
                "only the last chunk may be shorter"
            )
    out = {k: v for k, v in latents[0].items() if k != "noise_mask"}
    if len(chunks) == 1 or temporal_overlap == 0:
        out["samples"] = first if len(chunks) == 1 else torch.cat(chunks, dim=2)
        return out
    step = first.shape[2] - min(temporal_overlap, first.shape[2] - 1)
    merged = first.new_empty((*first.shape[:2], step * (len(chunks) - 1) + chunks[-1].shape[2], *first.shape[3:]))
    merged[:, :, : first.shape[2]] = first
    filled = first.shape[2]
    for i, chunk in enumerate(chunks[1:], start=1):
        start = i * step
        fade = min(filled - start, chunk.shape[2])
        if fade > 0:
            w = crossfade_weights(fade, chunk).view(1, 1, fade, 1, 1)
            merged[:, :, start : start + fade] = merged[:, :, start : start + fade] * w + chunk[:, :, :fade] * (1.0 - w)
        merged[:, :, start + max(fade, 0) : start + chunk.shape[2]] = chunk[:, :, max(fade, 0) :]
        filled = start + chunk.shape[2]
    out["samples"] = merged
    return out


class SeedVR2Preprocess:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "image/pre-processors"
    RETURN_TYPES = ("IMAGE",)
    RETURN_NAMES = ("images",)
    SEARCH_ALIASES = ["seedvr2", "upscale", "video upscale", "pad", "preprocess"]
    DESCRIPTION = "Pads resized frames for SeedVR2's VAE (sides to multiples of 16, 4n+1 frames); alpha is dropped."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"resized_images": ("IMAGE", {"tooltip": "The resized image or frames."})}}

    def execute(self, resized_images: torch.Tensor):
        return (pad_for_vae(resized_images),)


class SeedVR2PostProcessing:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "image/post-processors"
    RETURN_TYPES = ("IMAGE",)
    RETURN_NAMES = ("images",)
    SEARCH_ALIASES = ["seedvr2", "upscale", "color correction", "color match", "postprocess"]
    DESCRIPTION = "Cuts the decoded frames back to the resized input's size and length and matches its colours."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "images": ("IMAGE", {"tooltip": "The decoded frames."}),
                "original_resized_images": ("IMAGE", {"tooltip": "The resized frames before SeedVR2Preprocess."}),
                "color_correction_method": (
                    "COMBO",
                    {
                        "default": "lab",
                        "multiselect": False,
                        "options": ["lab", "wavelet", "adain", "none"],
                        "tooltip": "How the colours are matched to the original frames.",
                    },
                ),
            }
        }

    def execute(self, images: torch.Tensor, original_resized_images: torch.Tensor, color_correction_method: str):
        return (postprocess(images, original_resized_images, color_correction_method),)


class SeedVR2TemporalChunk:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "model/latent/batch"
    RETURN_TYPES = ("LATENT", "INT")
    RETURN_NAMES = ("latents", "temporal_overlap")
    OUTPUT_IS_LIST = (True, False)
    SEARCH_ALIASES = ["seedvr2", "split", "chunk", "temporal", "video upscale", "rebatch"]
    DESCRIPTION = "Splits a SeedVR2 video latent into overlapping chunks that are sampled one at a time."

    @classmethod
    def INPUT_TYPES(cls):
        manual = {"frames_per_chunk": ("INT", {"default": 21, "min": 1, "max": 16384, "step": 4})}
        return {
            "required": {
                "latent": ("LATENT", {}),
                "temporal_overlap": OVERLAP,
                "chunking_mode": dynamic_combo({"auto": {}, "manual": manual}),
            }
        }

    def execute(self, latent: dict, temporal_overlap: int, chunking_mode: str, **kwargs: Any):
        if chunking_mode == "manual":
            frames = combo_inputs(kwargs, "chunking_mode").get("frames_per_chunk", 21)
        elif chunking_mode == "auto":
            frames = auto_frames_per_chunk(_video_latent(latent, "SeedVR2TemporalChunk"))
        else:
            raise ValueError(f"SeedVR2TemporalChunk: chunking_mode must be 'auto' or 'manual', got {chunking_mode!r}")
        return split_chunks(latent, temporal_overlap, frames)


class SeedVR2TemporalMerge:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "model/latent/batch"
    INPUT_IS_LIST = True
    RETURN_TYPES = ("LATENT",)
    RETURN_NAMES = ("latent",)
    SEARCH_ALIASES = ["seedvr2", "merge", "temporal", "hann", "crossfade"]
    DESCRIPTION = "Joins sampled SeedVR2 latent chunks, crossfading each overlap."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "latents": ("LATENT", {}),
                "temporal_overlap": (OVERLAP[0], {**OVERLAP[1], "forceInput": True}),
            }
        }

    def execute(self, latents: list[dict], temporal_overlap: list[int]):
        return (merge_chunks(latents, temporal_overlap[0]),)


def seedvr2_condition(samples: torch.Tensor) -> torch.Tensor:
    """[B,16,T,H,W] latent -> [B,17,T,H,W]: the latent and a channel of ones (ComfyUI's mask, all known)."""
    if not isinstance(samples, torch.Tensor) or samples.ndim != 5 or samples.shape[1] != LATENT_CHANNELS:
        shape = tuple(samples.shape) if isinstance(samples, torch.Tensor) else type(samples).__name__
        raise ValueError(f"SeedVR2Conditioning: latent must be SeedVR2's [B, 16, T, H, W] latent, got {shape}")
    return torch.cat((samples, torch.ones_like(samples[:, :1])), dim=1)


class SeedVR2Conditioning:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "model/conditioning"
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING")
    RETURN_NAMES = ("positive", "negative")
    SEARCH_ALIASES = ["seedvr2", "upscale", "conditioning"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "vae_conditioning": ("LATENT", {"display_name": "latent"}),
            }
        }

    def execute(self, model, vae_conditioning: dict):
        from nodes.models.seedvr2_model import read_text_embeddings

        ref = require_component(model, "diffusion_model", "model")
        if ref.arch != "seedvr2" or not ref.sources:
            raise ValueError(f"SeedVR2Conditioning: model must be a SeedVR2 transformer, got a {ref.arch} model")
        if not isinstance(vae_conditioning, dict) or "samples" not in vae_conditioning:
            raise ValueError("SeedVR2Conditioning: latent must be a LATENT ({'samples': ...})")
        condition = seedvr2_condition(vae_conditioning["samples"])
        positive, negative = read_text_embeddings(ref.sources[0])
        return [[positive[None], {"condition": condition}]], [[negative[None], {"condition": condition}]]


NODE_CLASS_MAPPINGS = {
    "SeedVR2Conditioning": SeedVR2Conditioning,
    "SeedVR2Preprocess": SeedVR2Preprocess,
    "SeedVR2PostProcessing": SeedVR2PostProcessing,
    "SeedVR2TemporalChunk": SeedVR2TemporalChunk,
    "SeedVR2TemporalMerge": SeedVR2TemporalMerge,
}
NODE_DISPLAY_NAME_MAPPINGS = {
    "SeedVR2Conditioning": "Apply SeedVR2 Conditioning",
    "SeedVR2Preprocess": "Pre-Process SeedVR2 Input",
    "SeedVR2PostProcessing": "Post-Process SeedVR2 Output",
    "SeedVR2TemporalChunk": "Split SeedVR2 Latent",
    "SeedVR2TemporalMerge": "Merge SeedVR2 Latents",
}
