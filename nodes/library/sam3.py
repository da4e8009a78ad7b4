"""SAM 3's detection node (today's ComfyUI's comfy_extras.nodes_sam3, Comfy-Org/ComfyUI a439dcae07d6): SAM3_Detect
segments what text prompts (CLIPTextEncode on the SAM 3 checkpoint's CLIP), boxes or points point at, per image of a
batch. The work runs as the `sam3_detect` ModelFn (nodes/modelfns/sam3.py) on the executor holding the weights.

Not here yet: SAM3_VideoTrack, SAM3_TrackPreview and SAM3_TrackToMask (the memory tracker)."""

from __future__ import annotations

import json
from typing import Any

import torch

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


NODE_CLASS_MAPPINGS = {"SAM3_Detect": SAM3_Detect}
NODE_DISPLAY_NAME_MAPPINGS = {"SAM3_Detect": "SAM3 Detect"}
