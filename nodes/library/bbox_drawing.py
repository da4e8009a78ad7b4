"""Today's ComfyUI bounding-box image nodes (added after 0.3.64): Draw BBoxes (`comfy_extras.nodes_rtdetr`) draws
detections (boxes {x, y, width, height, label?, score?}) as coloured outlines with their COCO label and score, on
the images or on a black canvas that holds them; Crop By BBoxes (`comfy_extras.nodes_sdpose`) crops each frame to
the union of its boxes and resizes the crop.

A BOUNDING_BOX value is one box, a flat list of boxes (the same for every frame) or a list of per-frame lists."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont

from nodes.upscale import common_upscale

# The 80 COCO classes in the detector's label order: a label outside them is drawn without text, in the first colour.
COCO_CLASSES = [
    "person",
    "bicycle",
    "car",
    "motorcycle",
    "airplane",
    "bus",
    "train",
    "truck",
    "boat",
    "traffic light",
    "fire hydrant",
    "stop sign",
    "parking meter",
    "bench",
    "bird",
    "cat",
    "dog",
    "horse",
    "sheep",
    "cow",
    "elephant",
    "bear",
    "zebra",
    "giraffe",
    "backpack",
    "umbrella",
    "handbag",
    "tie",
    "suitcase",
    "frisbee",
    "skis",
    "snowboard",
    "sports ball",
    "kite",
    "baseball bat",
    "baseball glove",
    "skateboard",
    "surfboard",
    "tennis racket",
    "bottle",
    "wine glass",
    "cup",
    "fork",
    "knife",
    "spoon",
    "bowl",
    "banana",
    "apple",
    "sandwich",
    "orange",
    "broccoli",
    "carrot",
    "hot dog",
    "pizza",
    "donut",
    "cake",
    "chair",
    "couch",
    "potted plant",
    "bed",
    "dining table",
    "toilet",
    "tv",
    "laptop",
    "mouse",
    "remote",
    "keyboard",
    "cell phone",
    "microwave",
    "oven",
    "toaster",
    "sink",
    "refrigerator",
    "book",
    "clock",
    "vase",
    "scissors",
    "teddy bear",
    "hair drier",
    "toothbrush",
]
# Outline colours, picked by the label's class index.
PALETTE = [
    (255, 0, 0),
    (0, 200, 0),
    (0, 0, 255),
    (255, 165, 0),
    (128, 0, 128),
    (0, 255, 255),
    (255, 20, 147),
    (100, 149, 237),
]
OUTLINE = 3
CANVAS_DEFAULT = 640  # the side of the canvas drawn on when neither an image nor a box gives a size


def _frames(bboxes: Any, count: int) -> list[list[dict]]:
    """Per-frame box lists, `count` of them: one box or one list serves every frame, missing frames have none."""
    if isinstance(bboxes, dict):
        bboxes = [[bboxes]]
    elif not isinstance(bboxes, list) or not bboxes:
        bboxes = [[]]
    elif isinstance(bboxes[0], dict):
        bboxes = [bboxes]
    if len(bboxes) == 1:
        bboxes = bboxes * count
    frames = (list(bboxes) + [[]] * count)[:count]
    for frame in frames:
        if not isinstance(frame, list) or not all(isinstance(b, dict) for b in frame):
            raise ValueError(
                "Draw BBoxes: bboxes must be boxes {x, y, width, height}, a list of them or one list per image"
            )
    return frames


def _font() -> ImageFont.ImageFont:
    # ComfyUI asks for Arial at 16 px and falls back to Pillow's default font where Arial is not installed.
    try:
        return ImageFont.truetype("arial.ttf", 16)
    except OSError:
        return ImageFont.load_default()


def _to_pil(frame: torch.Tensor) -> Image.Image:
    # 8-bit levels truncated, as torchvision's ToPILImage converts a float image
    levels = (frame.float().cpu() * 255).clamp(0, 255).to(torch.uint8).numpy()
    mode = {1: "L", 3: "RGB", 4: "RGBA"}.get(levels.shape[-1])
    if mode is None:
        raise ValueError(f"Draw BBoxes: an image has {levels.shape[-1]} channels; 1, 3 or 4 can be drawn on")
    return Image.fromarray(levels[..., 0] if mode == "L" else levels, mode)


def _from_pil(img: Image.Image) -> torch.Tensor:
    array = np.asarray(img, dtype=np.float32) / 255.0
    return torch.from_numpy(array if array.ndim == 3 else array[..., None])


def draw_detections(img: Image.Image, detections: list[dict]) -> Image.Image:
    """Outlines, lowest score first (the best box ends on top), with "label score" for a COCO label."""
    # boxes and scores go through float32 tensors, as ComfyUI's do, so the drawn corners and printed scores match
    boxes = torch.tensor([[d["x"], d["y"], d["x"] + d["width"], d["y"] + d["height"]] for d in detections]).tolist()
    scores = torch.tensor([d.get("score", 1.0) for d in detections]).tolist()
    labels = [d.get("label") if d.get("label") in COCO_CLASSES else None for d in detections]
    draw, font = ImageDraw.Draw(img), _font()
    for box, label, score in sorted(zip(boxes, labels, scores), key=lambda item: item[2]):
        color = PALETTE[(COCO_CLASSES.index(label) if label is not None else 0) % len(PALETTE)]
        draw.rectangle(box, outline=color, width=OUTLINE)
        if label is not None:
            draw.text((box[0] + 2, box[1] + 2), f"{label} {score:.2f}", fill=color, font=font)
    return img


def draw_bboxes(bboxes: Any, image: torch.Tensor | None) -> torch.Tensor:
    count = image.shape[0] if image is not None else 1
    frames = _frames(bboxes, count)
    if image is None:
        width = max((int(d["x"] + d["width"]) for frame in frames for d in frame), default=CANVAS_DEFAULT)
        height = max((int(d["y"] + d["height"]) for frame in frames for d in frame), default=CANVAS_DEFAULT)
        image = torch.zeros((len(frames), height, width, 3), dtype=torch.float32)
    out = []
    for frame, detections in zip(image, frames):
        img = _to_pil(frame)
        if detections and img.mode == "L":
            raise ValueError("Draw BBoxes: the boxes are drawn in colour, which a 1-channel image cannot hold")
        out.append(_from_pil(draw_detections(img, detections) if detections else img))
    return torch.stack(out)


def crop_by_bboxes(image: torch.Tensor, bboxes: Any, width: int, height: int, padding: int) -> torch.Tensor:
    """Each frame cropped to the union of its boxes (grown by `padding`, kept inside the image) and resized
    (bilinear) to width x height; a frame without boxes gives no crop, and none at all gives the images back."""
    if not isinstance(bboxes, list):
        bboxes = [[bboxes]]
    elif not bboxes:
        return image
    _, img_h, img_w, channels = image.shape
    crops = []
    for index in range(image.shape[0]):
        boxes = bboxes[min(index, len(bboxes) - 1)]
        if not boxes:
            continue
        if not isinstance(boxes, list) or not all(isinstance(b, dict) for b in boxes):
            raise ValueError("Crop By BBoxes: bboxes must be one box or one list of boxes per image")
        x1 = max(0, min(int(b["x"]) for b in boxes) - padding)
        y1 = max(0, min(int(b["y"]) for b in boxes) - padding)
        x2 = min(img_w, max(int(b["x"] + b["width"]) for b in boxes) + padding)
        y2 = min(img_h, max(int(b["y"] + b["height"]) for b in boxes) + padding)
        if x2 <= x1 or y2 <= y1:
            # a box outside the image: a square of 30% of the short side, centred, 10% from the top
            side = int(min(img_h, img_w) * 0.3)
            x1, y1 = max(0, (img_w - side) // 2), max(0, int(img_h * 0.1))
            x2, y2 = min(img_w, x1 + side), min(img_h, y1 + side)
            if x2 <= x1 or y2 <= y1:
                crops.append(torch.zeros(1, channels, height, width, dtype=image.dtype))
                continue
        region = image[index : index + 1, y1:y2, x1:x2].movedim(-1, 1)
        crops.append(common_upscale(region, width, height, "bilinear", "disabled"))
    if not crops:
        return image
    return torch.cat(crops).movedim(1, -1)


_BOX_DEFAULT = {"x": 0, "y": 0, "width": 512, "height": 512}


class DrawBBoxes:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_rtdetr"
    FUNCTION = "execute"
    CATEGORY = "detection/"
    SEARCH_ALIASES = ["bbox", "bounding box", "object detection", "rt_detr", "visualize detections", "coco"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "bboxes": ("BOUNDING_BOX", {"default": dict(_BOX_DEFAULT), "socketless": True, "forceInput": True})
            },
            "optional": {"image": ("IMAGE", {})},
        }

    RETURN_TYPES = ("IMAGE",)
    RETURN_NAMES = ("out_image",)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = "Draws detection boxes with their labels and scores on the images (or on a black canvas)."

    def execute(self, bboxes: Any, image: torch.Tensor | None = None):
        return (draw_bboxes(bboxes, image),)


class CropByBBoxes:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_sdpose"
    FUNCTION = "execute"
    CATEGORY = "image/preprocessors"
    SEARCH_ALIASES = ["crop", "face crop", "bbox crop", "pose", "bounding box"]

    @classmethod
    def INPUT_TYPES(cls):
        size = {"min": 64, "max": 4096, "step": 8}
        return {
            "required": {
                "image": ("IMAGE", {}),
                "bboxes": ("BOUNDING_BOX", {"default": dict(_BOX_DEFAULT), "socketless": True, "forceInput": True}),
                "output_width": ("INT", {"default": 512, **size, "tooltip": "Width each crop is resized to."}),
                "output_height": ("INT", {"default": 512, **size, "tooltip": "Height each crop is resized to."}),
                "padding": (
                    "INT",
                    {
                        "default": 0,
                        "min": 0,
                        "max": 1024,
                        "step": 1,
                        "tooltip": "Pixels added on each side of the boxes before cropping.",
                    },
                ),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    OUTPUT_TOOLTIPS = ("All crops in one image batch.",)
    DESCRIPTION = "Crops each image to the union of its bounding boxes and resizes the crops to one size."

    def execute(self, image: torch.Tensor, bboxes: Any, output_width: int, output_height: int, padding: int):
        return (crop_by_bboxes(image, bboxes, output_width, output_height, padding),)


NODE_CLASS_MAPPINGS = {"DrawBBoxes": DrawBBoxes, "CropByBBoxes": CropByBBoxes}
NODE_DISPLAY_NAME_MAPPINGS = {"DrawBBoxes": "Draw BBoxes"}
