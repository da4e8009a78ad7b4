"""SAM 3's detection node (today's ComfyUI's comfy_extras.nodes_sam3, Comfy-Org/ComfyUI a439dcae07d6): SAM3_Detect
segments what text prompts (CLIPTextEncode on the SAM 3 checkpoint's CLIP), boxes or points point at, per image of a
batch. The work runs as the `sam3_detect` ModelFn (nodes/modelfns/sam3.py) on the executor holding the weights.

SAM3_VideoTrack follows objects (first-frame masks and/or what text prompts find) through a video with SAM 3.1's
multiplex memory tracker (the `sam3_track` ModelFn, nodes/models/sam3_video.py); its SAM3_TRACK_DATA is ComfyUI's
dict: `packed_masks` ([frames, objects, 1008, 126] uint8, bit-packed, or None), `n_frames`, `scores` and
`orig_size`. SAM3_TrackToMask turns chosen objects of it into MASKs. Not here yet: SAM3_TrackPreview (a video
preview of the tracks)."""

from __future__ import annotations

import json
from typing import Any

import torch
import torch.nn.functional as F

from nodes.inputs import require_component
from nodes.ksampler import call_model_fn

MODULE = "comfy_extras.nodes_sam3"


def text_prompts(conditioning: list) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """(states [1,T,D], mask [1,T], detections kept) per prompt: the `sam3_multi_cond` entries a SAM 3 CLIP adds
    for comma-separated prompts, else the first conditioning with its mask (all ones when it has none), one each."""
    cond, opts = conditioning[0][0], conditioning[0][1]
    multi = opts.get("sam3_multi_cond")
    entries = multi if multi is not None else [{"cond": cond, "attention_mask": opts.get("attention_mask")}]
    out = []
    for e in entries:
        mask = e.get("attention_mask")
        if mask is None:
            mask = torch.ones(e["cond"].shape[0], e["cond"].shape[1], dtype=torch.int64)
        out.append((e["cond"], mask, int(e.get("max_detections", 1)) if multi is not None else 1))
    return out


def normalised_boxes(bboxes: Any, frames: int, height: int, width: int) -> list[list[list[float]]] | None:
    """BOUNDING_BOX (one box, a list for every frame, or a list per frame, the last repeated) as per-frame lists
    of normalised cx, cy, w, h."""

    def norm(boxes: list[dict]) -> list[list[float]]:
        return [
            [
                (d["x"] + d["width"] / 2) / width,
                (d["y"] + d["height"] / 2) / height,
                d["width"] / width,
                d["height"] / height,
            ]
            for d in boxes
        ]

    if bboxes is None:
        return None
    if isinstance(bboxes, dict):
        return [norm([bboxes])] * frames
    if isinstance(bboxes, list) and bboxes and isinstance(bboxes[0], list):
        per = [norm(f) if f else [] for f in bboxes]
        while len(per) < frames:
            per.append(per[-1])
        return per
    if isinstance(bboxes, list) and bboxes:
        return [norm(bboxes)] * frames
    return None


class SAM3_Detect:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "image/detection"
    RETURN_TYPES = ("MASK", "BOUNDING_BOX")
    RETURN_NAMES = ("masks", "bboxes")
    DESCRIPTION = "Open-vocabulary detection and segmentation with SAM 3: text, box or point prompts."
    SEARCH_ALIASES = ["sam3", "segment anything", "open vocabulary", "text detection", "segment"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "image": ("IMAGE", {}),
                "threshold": ("FLOAT", {"default": 0.5, "min": 0.0, "max": 1.0, "step": 0.01}),
                "refine_iterations": (
                    "INT",
                    {
                        "default": 2,
                        "min": 0,
                        "max": 5,
                        "tooltip": "Passes of SAM's mask decoder over each mask (0: the detector's own masks).",
                    },
                ),
                "individual_masks": (
                    "BOOLEAN",
                    {"default": False, "tooltip": "One mask per object instead of their union."},
                ),
            },
            "optional": {
                "conditioning": ("CONDITIONING", {"tooltip": "What to find: CLIPTextEncode with the SAM 3 CLIP."}),
                "bboxes": ("BOUNDING_BOX", {"forceInput": True, "tooltip": "Boxes to segment inside."}),
                "positive_coords": (
                    "STRING",
                    {"forceInput": True, "tooltip": 'Points on the object, JSON [{"x": .., "y": ..}] in pixels.'},
                ),
                "negative_coords": (
                    "STRING",
                    {"forceInput": True, "tooltip": 'Points off the object, JSON [{"x": .., "y": ..}] in pixels.'},
                ),
            },
        }

    async def execute(
        self,
        model,
        image: torch.Tensor,
        threshold: float = 0.5,
        refine_iterations: int = 2,
        individual_masks: bool = False,
        conditioning=None,
        bboxes=None,
        positive_coords: str | None = None,
        negative_coords: str | None = None,
    ):
        model = require_component(model, "diffusion_model", "model")
        if model.arch not in ("sam3", "sam31"):
            raise ValueError(f"model: SAM3_Detect needs a SAM 3 model, not a {model.arch} one")
        b, h, w = image.shape[:3]
        positive = json.loads(positive_coords) if positive_coords else []
        negative = json.loads(negative_coords) if negative_coords else []
        points = [[p["x"], p["y"], 1] for p in positive] + [[p["x"], p["y"], 0] for p in negative]
        prompts = text_prompts(conditioning) if conditioning else []
        inputs: dict[str, torch.Tensor] = {"image": image}
        for i, (cond, mask, _) in enumerate(prompts):
            inputs[f"text.{i}"], inputs[f"mask.{i}"] = cond, mask
        params = {
            "threshold": float(threshold),
            "refine_iterations": int(refine_iterations),
            "individual_masks": bool(individual_masks),
            "max_detections": [n for _, _, n in prompts],
            "boxes": normalised_boxes(bboxes, b, h, w),
            "points": points,
        }
        out = await call_model_fn("sam3_detect", model, "model", inputs, params)
        per_frame: list[list[dict]] = [[] for _ in range(b)]
        for frame, x, y, bw, bh, score in out["boxes"].tolist():
            per_frame[int(frame)].append({"x": x, "y": y, "width": bw, "height": bh, "score": score})
        return (out["masks"], per_frame)


class SAM3_VideoTrack:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "image/detection"
    RETURN_TYPES = ("SAM3_TRACK_DATA",)
    RETURN_NAMES = ("track_data",)
    DESCRIPTION = "Tracks objects through video frames with SAM 3.1's memory tracker, from masks or text prompts."
    SEARCH_ALIASES = ["sam3", "video", "track", "propagate"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "images": ("IMAGE", {"tooltip": "The video's frames."}),
                "model": ("MODEL", {}),
                "detection_threshold": (
                    "FLOAT",
                    {
                        "default": 0.5,
                        "min": 0.0,
                        "max": 1.0,
                        "step": 0.01,
                        "tooltip": "Score a text detection must pass.",
                    },
                ),
                "max_objects": (
                    "INT",
                    {
                        "default": 4,
                        "min": 0,
                        "max": 64,
                        "tooltip": "Most objects tracked, the initial masks included (0: 64).",
                    },
                ),
                "detect_interval": ("INT", {"default": 1, "min": 1, "tooltip": "Detect new objects every N frames."}),
            },
            "optional": {
                "initial_mask": ("MASK", {"tooltip": "First-frame masks, one per object."}),
                "conditioning": ("CONDITIONING", {"tooltip": "Text prompts that find objects while tracking."}),
            },
        }

    async def execute(
        self,
        images: torch.Tensor,
        model,
        detection_threshold: float = 0.5,
        max_objects: int = 4,
        detect_interval: int = 1,
        initial_mask: torch.Tensor | None = None,
        conditioning=None,
    ):
        model = require_component(model, "diffusion_model", "model")
        if model.arch != "sam31":
            raise ValueError(f"model: SAM3_VideoTrack needs a SAM 3.1 (multiplex) model, not a {model.arch} one")
        prompts = text_prompts(conditioning) if conditioning else []
        if not prompts and initial_mask is None:
            raise ValueError("SAM3_VideoTrack needs initial_mask or conditioning")
        n, h, w = images.shape[:3]
        inputs: dict[str, torch.Tensor] = {"images": images}
        if initial_mask is not None:
            inputs["initial_mask"] = initial_mask.reshape(-1, *initial_mask.shape[-2:])
        for i, (cond, mask, _) in enumerate(prompts):
            inputs[f"text.{i}"], inputs[f"mask.{i}"] = cond, mask
        params = {
            "detection_threshold": float(detection_threshold),
            "max_objects": int(max_objects),
            "detect_interval": int(detect_interval),
            "prompts": len(prompts),
        }
        out = await call_model_fn("sam3_track", model, "model", inputs, params)
        track = {
            "packed_masks": out.get("packed"),
            "n_frames": n,
            "scores": out["scores"].tolist(),
            "orig_size": (h, w),
        }
        return (track,)


def unpack_masks(packed: torch.Tensor) -> torch.Tensor:
    """Bit-packed rows [..., W/8] uint8 -> bool [..., W]."""
    bits = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8)
    return (packed.unsqueeze(-1) & bits).bool().view(*packed.shape[:-1], -1)


class SAM3_TrackToMask:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "image/detection"
    RETURN_TYPES = ("MASK",)
    RETURN_NAMES = ("masks",)
    DESCRIPTION = "The union of chosen tracked objects as one mask per frame, at the video's size."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "track_data": ("SAM3_TRACK_DATA", {}),
                "object_indices": (
                    "STRING",
                    {"default": "", "tooltip": "Comma-separated object numbers to include (e.g. 0,2); empty: all."},
                ),
            }
        }

    def execute(self, track_data: dict, object_indices: str = ""):
        packed = track_data["packed_masks"]
        h, w = track_data["orig_size"]
        if packed is None:
            return (torch.zeros(track_data["n_frames"], h, w),)
        objects = packed.shape[1]
        if object_indices.strip():
            wanted = [int(i.strip()) for i in object_indices.split(",") if i.strip().isdigit()]
            wanted = [i for i in wanted if 0 <= i < objects]
        else:
            wanted = list(range(objects))
        if not wanted:
            return (torch.zeros(packed.shape[0], h, w),)
        union = packed[:, wanted[0]].clone()
        for i in wanted[1:]:
            union |= packed[:, i]
        masks = unpack_masks(union).unsqueeze(1).float()
        return (F.interpolate(masks, size=(h, w), mode="bilinear", align_corners=False)[:, 0],)


NODE_CLASS_MAPPINGS = {
    "SAM3_Detect": SAM3_Detect,
    "SAM3_VideoTrack": SAM3_VideoTrack,
    "SAM3_TrackToMask": SAM3_TrackToMask,
}
NODE_DISPLAY_NAME_MAPPINGS = {
    "SAM3_Detect": "SAM3 Detect",
    "SAM3_VideoTrack": "Run SAM3 Video Track",
    "SAM3_TrackToMask": "SAM3 Track to Mask",
}
