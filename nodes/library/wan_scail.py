"""Wan SCAIL / SCAIL-2's nodes (ComfyUI's comfy_extras.nodes_scail, newer than every ComfyUI that runs here; written
from its definition): WanSCAILToVideo and SCAIL2ColoredMask.

WanSCAILToVideo puts on both conditionings what the SCAIL network (nodes.models.wan_scail) reads beside the prompt:
each reference image as its own one-frame latent (replacement mode: only the character, cut out by its mask), the
pose video's latent at half the video's size (from video_frame_offset, cut with its mask video to whole 4-frame
groups, scaled by pose_strength, within the pose window), the mask videos as 28 binary channels per latent frame
(7 colours x 4 frames, at an eighth of their size), whether it runs in animation or replacement mode, and the CLIP
vision output. With previous_frames (an extension chunk) their last previous_frame_count frames are encoded into
the latent's first frames, which a noise mask keeps.

SCAIL2ColoredMask paints SAM3 tracks (SAM3_VideoTrack's SAM3_TRACK_DATA: bit-packed per-object masks) in the colours
SCAIL-2 was trained on, one colour per identity, for the driving video and for the reference images.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from nodes import MAX_RESOLUTION
from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.library.wan import encode_video
from nodes.upscale import common_upscale
from nodes.video_inputs import video_inputs

CATEGORY = "model/conditioning/wan/scail"
TRACK_DATA = "SAM3_TRACK_DATA"
# SCAIL-2's identity colours, in the order identities take them (the model knows these colours only)
PALETTE = ((0.0, 0.0, 1.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (1.0, 0.0, 1.0), (0.0, 1.0, 1.0), (1.0, 1.0, 0.0))
ON = 225.0 / 255.0  # a mask channel counts as lit above this
SORTS = ["none", "left_to_right", "area"]


def _resize(images: torch.Tensor, width: int, height: int, method: str) -> torch.Tensor:
    return common_upscale(images.movedim(-1, 1), width, height, method, "center").movedim(1, -1)


def mask_channels(rgb: torch.Tensor) -> torch.Tensor:
    """A colour-mask video [T, H, W, 3] -> SCAIL-2's [1, (T-1)//4+1, 28, H/8, W/8] (sizes rounded up): per frame 7
    binary channels (white, red, green, blue, yellow, magenta, cyan: each of R, G, B lit or not), area-averaged to
    an eighth, the first frame counted four times so every latent frame stacks 4 video frames."""
    lit = rgb.movedim(-1, 1).float() > ON
    r, g, b = (lit[:, i : i + 1].float() for i in range(3))
    nr, ng, nb = 1 - r, 1 - g, 1 - b
    binary = torch.cat([r * g * b, r * ng * nb, nr * g * nb, nr * ng * b, r * g * nb, r * ng * b, nr * g * b], dim=1)
    h, w = rgb.shape[1:3]
    for _ in range(3):
        h, w = (h + 1) // 2, (w + 1) // 2
    binary = F.interpolate(binary, size=(h, w), mode="area")
    frames = torch.cat([binary[:1].expand(4, -1, -1, -1), binary[1:]])
    return frames.reshape((rgb.shape[0] - 1) // 4 + 1, 28, h, w).unsqueeze(0)


def set_in_range(conditioning: list, values: dict, start: float, end: float) -> list:
    """Each cond with `values` over the part of its own [start_percent, end_percent] inside [start, end], and
    without them on the parts before and after (1e-5 apart, so one cond is active at any step)."""
    if start > end:
        return conditioning
    eps = 1e-5
    out = []
    for c in conditioning:
        own_start, own_end = c[1].get("start_percent", 0.0), c[1].get("end_percent", 1.0)
        lo, hi = max(start, own_start), min(end, own_end)
        if lo >= hi:
            out.append(c)
            continue
        if lo > own_start:
            out += set_values([c], {"start_percent": own_start, "end_percent": lo - eps})
        out += set_values([c], {**values, "start_percent": lo, "end_percent": hi})
        if hi < own_end:
            out += set_values([c], {"start_percent": hi + eps, "end_percent": own_end})
    return out


def _append_references(conditioning: list, latents: list[torch.Tensor]) -> list:
    """`latents` after each cond's reference latents (ComfyUI's append of reference_latents)."""
    return [
        [c[0], {**c[1], "reference_latents": list(c[1].get("reference_latents") or []) + latents}] for c in conditioning
    ]


def _strength(default: float, tooltip: str) -> tuple:
    return ("FLOAT", {"default": default, "min": 0.0, "max": 10.0, "step": 0.01, "tooltip": tooltip})


def _percent(default: float, tooltip: str) -> tuple:
    return ("FLOAT", {"default": default, "min": 0.0, "max": 1.0, "step": 0.01, "tooltip": tooltip})


class WanSCAILToVideo:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_scail"
    FUNCTION = "execute"
    CATEGORY = CATEGORY
    EXPERIMENTAL = True
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT", "INT")
    RETURN_NAMES = ("positive", "negative", "latent", "video_frame_offset")
    OUTPUT_TOOLTIPS = (
        None,
        None,
        "An empty latent of the video's size.",
        "The offset plus the length: the next chunk's.",
    )

    @classmethod
    def INPUT_TYPES(cls):
        inputs = video_inputs()
        inputs["width"] = ("INT", {"default": 512, "min": 32, "max": MAX_RESOLUTION, "step": 32})
        inputs["height"] = ("INT", {"default": 896, "min": 32, "max": MAX_RESOLUTION, "step": 32})
        frame = {"min": 0, "max": MAX_RESOLUTION, "step": 1}
        return {
            "required": {
                **inputs,
                "pose_strength": _strength(1.0, "Scales the pose video's latent."),
                "pose_start": _percent(0.0, "Where in sampling the pose conditioning starts."),
                "pose_end": _percent(1.0, "Where in sampling the pose conditioning ends."),
                "video_frame_offset": (
                    "INT",
                    {
                        "default": 0,
                        **frame,
                        "tooltip": "The output frame this chunk starts at (the previous chunk's "
                        "video_frame_offset output).",
                    },
                ),
                "previous_frame_count": (
                    "INT",
                    {
                        "default": 5,
                        "min": 1,
                        "max": MAX_RESOLUTION,
                        "step": 4,
                        "tooltip": "How many of the "
                        "previous chunk's last frames anchor this one (SCAIL-2 was trained with 5).",
                    },
                ),
            },
            "optional": {
                "pose_video": ("IMAGE", {"tooltip": "The driving pose video; encoded at half the video's size."}),
                "pose_video_mask": (
                    "IMAGE",
                    {"tooltip": "SCAIL-2: the colour mask video of the driving identities, as big as pose_video."},
                ),
                "replacement_mode": (
                    "BOOLEAN",
                    {
                        "default": False,
                        "tooltip": "SCAIL-2: off animates the reference (mask video on black); on "
                        "replaces the driving video's character (mask video on white).",
                    },
                ),
                "reference_image": (
                    "IMAGE",
                    {
                        "tooltip": "The reference image; SCAIL-2 reads more images of the batch as further views, "
                        "each with its mask in reference_image_mask."
                    },
                ),
                "reference_image_mask": (
                    "IMAGE",
                    {"tooltip": "SCAIL-2: the references' colour masks, one per reference image."},
                ),
                "clip_vision_output": (
                    "CLIP_VISION_OUTPUT",
                    {"tooltip": "CLIP vision features of the reference (the model was trained on stretched images)."},
                ),
                "previous_frames": (
                    "IMAGE",
                    {
                        "tooltip": "SCAIL-2: the previous chunk's decoded frames; its last previous_frame_count anchor "
                        "this chunk."
                    },
                ),
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
        pose_strength: float = 1.0,
        pose_start: float = 0.0,
        pose_end: float = 1.0,
        video_frame_offset: int = 0,
        previous_frame_count: int = 5,
        replacement_mode: bool = False,
        reference_image: torch.Tensor | None = None,
        clip_vision_output: Any = None,
        pose_video: torch.Tensor | None = None,
        pose_video_mask: torch.Tensor | None = None,
        reference_image_mask: torch.Tensor | None = None,
        previous_frames: torch.Tensor | None = None,
    ):
        positive, negative = require(positive, "positive"), require(negative, "negative")
        frames = (length - 1) // 4 + 1
        latent = torch.zeros(batch_size, 16, frames, height // 8, width // 8)
        values: dict[str, Any] = {"ref_mask_flag": not replacement_mode}
        previous = None
        if previous_frames is not None and previous_frames.shape[0] > 0:
            previous = previous_frames[-previous_frame_count:]
            video_frame_offset = max(0, video_frame_offset - previous.shape[0])

        references: list[torch.Tensor] = []
        if reference_image is not None:
            refs = _resize(reference_image, width, height, "bicubic")
            if replacement_mode and reference_image_mask is not None:  # the character alone, on black
                masks = _resize(reference_image_mask, width, height, "nearest-exact")
                masks = masks[[min(i, masks.shape[0] - 1) for i in range(refs.shape[0])]]
                refs = refs * (masks[..., :3].amax(dim=-1, keepdim=True) > 0.1).to(refs.dtype)
            # one encode per image: a batch would be encoded as one video
            references = [await encode_video(vae, refs[i : i + 1, ..., :3]) for i in range(refs.shape[0])]
        if clip_vision_output is not None:
            values["clip_vision_output"] = clip_vision_output

        pose_video, pose_video_mask = (
            None if v is None or v.shape[0] <= video_frame_offset else v[video_frame_offset:]
            for v in (pose_video, pose_video_mask)
        )
        given = [v.shape[0] for v in (pose_video, pose_video_mask) if v is not None]
        if given:  # both cut to whole 4-frame groups of the shorter one, at most the length
            kept = (min(*given, length) - 1) // 4 * 4 + 1
            pose_video = None if pose_video is None else pose_video[:kept]
            pose_video_mask = None if pose_video_mask is None else pose_video_mask[:kept]
        pose: dict[str, Any] = {}
        if pose_video is not None:
            small = _resize(pose_video[:length], width // 2, height // 2, "area")
            pose["pose_video_latent"] = await encode_video(vae, small[..., :3]) * pose_strength
        if pose_video_mask is not None:
            small = _resize(pose_video_mask[:length], width // 2, height // 2, "area")
            values["driving_mask_28ch"] = mask_channels(small)
        if reference_image_mask is not None and reference_image is not None:
            masks = _resize(reference_image_mask, width, height, "nearest-exact")
            extra = [mask_channels(masks[min(i, masks.shape[0] - 1)][None]) for i in range(1, reference_image.shape[0])]
            primary = mask_channels(masks[:1])
            zeros = torch.zeros(1, frames, 28, *primary.shape[-2:], dtype=primary.dtype)
            values["ref_mask_28ch"] = torch.cat([*extra, primary, zeros], dim=1)

        out = {"samples": latent}
        if previous is not None:
            encoded = await encode_video(vae, _resize(previous, width, height, "bicubic")[..., :3])
            n = min(encoded.shape[2], frames)
            latent[:, :, :n] = encoded[:, :, :n].to(latent.dtype)
            out["noise_mask"] = torch.ones(1, 1, frames, *latent.shape[-2:])
            out["noise_mask"][:, :, :n] = 0.0

        def conditioned(cond: list) -> list:
            cond = set_values(cond, {"ref_mask_flag": values["ref_mask_flag"]})
            if references:
                cond = _append_references(cond, references)
            if "clip_vision_output" in values:
                cond = set_values(cond, {"clip_vision_output": values["clip_vision_output"]})
            if pose:
                cond = set_in_range(cond, pose, pose_start, pose_end)
            rest = {k: values[k] for k in ("driving_mask_28ch", "ref_mask_28ch") if k in values}
            return set_values(cond, rest) if rest else cond

        return conditioned(positive), conditioned(negative), out, video_frame_offset + length


def unpack_masks(packed: torch.Tensor) -> torch.Tensor:
    """SAM3's bit-packed masks [..., H, W/8] uint8 (8 pixels a byte, the first in the lowest bit) -> bool
    [..., H, W]."""
    bits = torch.arange(8, device=packed.device)
    return ((packed.unsqueeze(-1) >> bits) & 1).reshape(*packed.shape[:-1], -1).bool()


def _first_seen(masks: torch.Tensor) -> tuple[list[int], list[float], list[float]]:
    """Per object of [T, N, H, W] masks: the first frame it shows in, its centre column there (as a share of the
    width) and its area there (as a share of the frame)."""
    frames, _, h, w = masks.shape
    columns = masks.sum(dim=-2, dtype=torch.int32).double()  # [T, N, W]
    area = columns.sum(dim=-1)
    centre = (columns * torch.arange(w, dtype=torch.float64)).sum(dim=-1) / area.clamp(min=1)
    first = torch.where(area > 0, torch.arange(frames).unsqueeze(1), frames).amin(dim=0)
    at = first.clamp(max=frames - 1).unsqueeze(0)
    return first.tolist(), (centre.gather(0, at)[0] / w).tolist(), (area.gather(0, at)[0] / (h * w)).tolist()


def _select(track: dict, objects: list[int]) -> dict:
    """The track with only `objects` (in that order); no objects: no masks."""
    out = dict(track)
    packed = track["packed_masks"]
    out["packed_masks"] = packed[:, objects].contiguous() if packed is not None and objects else None
    if "scores" in out:
        scores = track.get("scores") or []
        out["scores"] = [scores[i] for i in objects if i < len(scores)] if out["packed_masks"] is not None else []
    return out


def _background(white: bool) -> tuple[float, float, float]:
    return (1.0, 1.0, 1.0) if white else (0.0, 0.0, 0.0)


def render_track(track: dict, white: bool) -> torch.Tensor:
    """A track painted [T, H, W, 3] at its video's size: object i in colour i (mod 6), the lower index on top, on
    a white or black background."""
    packed = track["packed_masks"]
    h, w = track["orig_size"]
    if packed is None or packed.shape[1] == 0:
        frames = track.get("n_frames", 1) if packed is None else packed.shape[0]
        return torch.tensor(_background(white)).expand(frames, h, w, 3).contiguous()
    masks = unpack_masks(packed)
    label = torch.zeros(masks.shape[0], *masks.shape[2:], dtype=torch.uint8)
    for i in reversed(range(masks.shape[1])):
        label.masked_fill_(masks[:, i], i % len(PALETTE) + 1)
    if tuple(label.shape[-2:]) != (h, w):
        label = F.interpolate(label.unsqueeze(1), size=(h, w), mode="nearest").squeeze(1)
    colours = torch.tensor((_background(white), *PALETTE))
    return colours[label.long()]


def render_mask(mask: torch.Tensor, white: bool) -> torch.Tensor:
    """A plain MASK [B, H, W] (or [H, W]) as one identity: the first colour where it is above 0.5."""
    mask = mask.float()
    mask = mask.unsqueeze(0) if mask.dim() == 2 else mask
    colour, background = torch.tensor(PALETTE[0]), torch.tensor(_background(white))
    return torch.where((mask > 0.5).unsqueeze(-1), colour, background)


class SCAIL2ColoredMask:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_scail"
    FUNCTION = "execute"
    CATEGORY = CATEGORY
    EXPERIMENTAL = True
    RETURN_TYPES = ("IMAGE", "IMAGE")
    RETURN_NAMES = ("pose_video_mask", "reference_image_mask")
    DESCRIPTION = (
        "Paints SAM3 tracks of the driving video and of the reference images in SCAIL-2's identity colours for "
        "WanSCAILToVideo; one order of the objects for both, so each identity keeps its colour."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "driving_track_data": (TRACK_DATA, {"tooltip": "SAM3 track of the driving video (pose_video_mask)."}),
                "object_indices": (
                    "STRING",
                    {
                        "default": "",
                        "multiline": False,
                        "tooltip": "Comma-separated object indices to keep in both (for example 0,2); empty keeps all.",
                    },
                ),
                "sort_by": (
                    "COMBO",
                    {
                        "default": "left_to_right",
                        "multiselect": False,
                        "options": SORTS,
                        "tooltip": "How objects "
                        "take the colours: by first frame seen, then leftmost centre (left_to_right) or largest area "
                        "(area) there; none keeps SAM3's order.",
                    },
                ),
                "replacement_mode": (
                    "BOOLEAN",
                    {
                        "default": False,
                        "tooltip": "Off: driving masks on black, reference masks on white. On: the other way round.",
                    },
                ),
            },
            "optional": {
                "ref_track_data": (
                    f"{TRACK_DATA},MASK",
                    {
                        "display_name": "reference_masks",
                        "tooltip": "SAM3 track of the reference image(s), one "
                        "identity per object, or a plain MASK of the one reference subject.",
                    },
                ),
            },
        }

    def execute(
        self, driving_track_data: dict, object_indices: str, sort_by: str, replacement_mode: bool, ref_track_data=None
    ):
        if sort_by not in SORTS:
            raise ValueError(f"sort_by: {sort_by!r} is not one of {', '.join(SORTS)}")

        def prepared(track: dict) -> dict:
            packed = track["packed_masks"]
            if sort_by != "none" and packed is not None and packed.shape[1] > 0:
                first, centre, area = _first_seen(unpack_masks(packed))
                if sort_by == "left_to_right":
                    order = sorted(range(len(centre)), key=lambda i: (first[i], centre[i]))
                else:
                    order = sorted(range(len(area)), key=lambda i: (first[i], -area[i]))
                track = _select(track, order)
            if object_indices.strip():
                wanted = [int(i.strip()) for i in object_indices.split(",") if i.strip().isdigit()]
                packed = track.get("packed_masks")
                count = packed.shape[1] if packed is not None else 0
                track = _select(track, [i for i in wanted if 0 <= i < count])
            return track

        driving = prepared(driving_track_data)
        video_masks = render_track(driving, white=replacement_mode)
        white_refs = not replacement_mode
        if ref_track_data is None:
            h, w = driving["orig_size"]
            ref_masks = torch.full((1, h, w, 3), 1.0 if white_refs else 0.0)
        elif isinstance(ref_track_data, torch.Tensor):
            ref_masks = render_mask(ref_track_data, white_refs)
        else:
            ref_masks = render_track(prepared(ref_track_data), white_refs)
        return video_masks, ref_masks


NODE_CLASS_MAPPINGS = {"WanSCAILToVideo": WanSCAILToVideo, "SCAIL2ColoredMask": SCAIL2ColoredMask}
NODE_DISPLAY_NAME_MAPPINGS = {"SCAIL2ColoredMask": "Create SCAIL-2 Colored Mask"}
