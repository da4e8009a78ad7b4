"""Today's ComfyUI Create Bounding Boxes (`comfy_extras.nodes_bounding_boxes`, added after 0.3.64): boxes drawn
on a canvas in the web UI (or given upstream as boxes, Ideogram-style elements or JSON text) become pixel
bounding boxes, Ideogram prompt elements (type, bbox [ymin, xmin, ymax, xmax] on a 0-1000 grid, text,
description, colour palette) and a preview image of the layout.

Box values: pixel boxes are {x, y, width, height, metadata: {type, text, desc, palette}}; inside the node
a region holds fractions of the canvas {x, y, w, h} and the metadata."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageEnhance, ImageFont

PREVIEW_LONG_EDGE = 1024  # the preview is at most this long
PREVIEW_DIM = 0.25  # a background image shows at a quarter of its brightness
GRID = 1000  # element boxes are on a 0..1000 grid
GREY = (140, 140, 140)  # the outline of a box without a palette


def hex_rgb(value: str) -> tuple[int, int, int]:
    digits = value.lstrip("#")
    try:
        return (
            (int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16)) if len(digits) == 6 else (255, 255, 255)
        )
    except ValueError:
        return (255, 255, 255)


def legible_on_dark(rgb: tuple[int, int, int]) -> tuple[int, int, int]:
    """The colour, lightened towards white until its luma reaches 130 (text over the dimmed canvas)."""
    luma = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]
    if luma >= 130:
        return rgb
    t = (130 - luma) / (255 - luma)
    return tuple(round(c + (255 - c) * t) for c in rgb)


def palette_of(colors: Any) -> list[str]:
    values = colors.values() if isinstance(colors, dict) else (colors or [])
    return [c.upper() for c in values if isinstance(c, str) and c]


# -- what comes in -------------------------------------------------------------------------------------------


def _pixel_box(box: dict) -> dict:
    out = {k: box.get(k, 0) for k in ("x", "y", "width", "height")}
    if isinstance(box.get("metadata"), dict):
        out["metadata"] = box["metadata"]
    return out


def _from_elements(elements: list, width: int, height: int) -> list[dict]:
    boxes = []
    for element in (e for e in elements if isinstance(e, dict)):
        corners = element.get("bbox")
        if not (isinstance(corners, (list, tuple)) and len(corners) == 4):
            raise ValueError("Create Bounding Boxes: an element has no 'bbox' [ymin, xmin, ymax, xmax]")
        try:
            y0, x0, y1, x1 = (float(v) / GRID for v in corners)
        except (TypeError, ValueError):
            raise ValueError("Create Bounding Boxes: an element's 'bbox' must hold four numbers") from None
        kind = "text" if element.get("type") == "text" else "obj"
        boxes.append(
            {
                "x": round(min(x0, x1) * width),
                "y": round(min(y0, y1) * height),
                "width": round(abs(x1 - x0) * width),
                "height": round(abs(y1 - y0) * height),
                "metadata": {
                    "type": kind,
                    "text": element.get("text", "") if kind == "text" else "",
                    "desc": element.get("desc", ""),
                    "palette": element.get("color_palette", []) or [],
                },
            }
        )
    return boxes


def _is_element(value: dict) -> bool:
    return isinstance(value.get("bbox"), (list, tuple)) and len(value["bbox"]) == 4


def _is_box(value: dict) -> bool:
    return all(k in value for k in ("x", "y", "width", "height"))


def incoming_boxes(data: Any, width: int, height: int) -> list[dict]:
    """Pixel boxes from a BOUNDING_BOX value (one box, a list, or a list of per-frame lists: the first
    frame), a list of elements, or JSON text of either."""
    if data is None:
        return []
    if isinstance(data, str):
        if not data.strip():
            return []
        try:
            data = json.loads(data)
        except ValueError as ex:
            raise ValueError(f"Create Bounding Boxes: the bboxes text is not valid JSON: {ex}") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise ValueError(
            f"Create Bounding Boxes: bboxes must be boxes, elements or JSON text, not {type(data).__name__}"
        )
    if not data:
        return []
    first = data[0]
    if isinstance(first, list):  # frames of boxes: the first frame's
        return [_pixel_box(b) for b in first if isinstance(b, dict)]
    if isinstance(first, dict) and _is_element(first):
        return _from_elements(data, width, height)
    if isinstance(first, dict) and _is_box(first):
        return [_pixel_box(b) for b in data if isinstance(b, dict)]
    raise ValueError(
        "Create Bounding Boxes: bboxes items must be boxes (x, y, width, height) or elements (with a 'bbox')"
    )


def regions_of(boxes: list, width: int, height: int) -> list[dict]:
    regions = []
    for box in (b for b in boxes if isinstance(b, dict)):
        meta = box["metadata"] if isinstance(box.get("metadata"), dict) else {}
        regions.append(
            {
                "x": box.get("x", 0) / (width or 1),
                "y": box.get("y", 0) / (height or 1),
                "w": box.get("width", 0) / (width or 1),
                "h": box.get("height", 0) / (height or 1),
                "type": meta.get("type", "obj"),
                "text": meta.get("text", ""),
                "desc": meta.get("desc", ""),
                "palette": meta.get("palette", []),
            }
        )
    return regions


# -- what goes out -------------------------------------------------------------------------------------------


def pixel_frame(regions: list[dict], width: int, height: int) -> list[list[dict]]:
    """The regions as one frame of pixel boxes (a negative size flips the box to positive)."""
    boxes = []
    for r in regions:
        x, y, w, h = r["x"], r["y"], r["w"], r["h"]
        if w < 0:
            x, w = x + w, -w
        if h < 0:
            y, h = y + h, -h
        boxes.append(
            {"x": round(x * width), "y": round(y * height), "width": round(w * width), "height": round(h * height)}
        )
    return [boxes] if boxes else []


def elements_of(regions: list[dict]) -> list[dict]:
    def grid(v: float) -> int:
        return max(0, min(GRID, round(v * GRID)))

    elements = []
    for r in regions:
        y0, x0, y1, x1 = grid(r["y"]), grid(r["x"]), grid(r["y"] + r["h"]), grid(r["x"] + r["w"])
        kind = "text" if r["type"] == "text" else "obj"
        element: dict[str, Any] = {"type": kind, "bbox": [min(y0, y1), min(x0, x1), max(y0, y1), max(x0, x1)]}
        if kind == "text":
            element["text"] = r["text"]
        element["desc"] = r["desc"]
        palette = palette_of(r["palette"])
        if palette:
            element["color_palette"] = palette[:5]
        elements.append(element)
    return elements


def _font(size: int) -> ImageFont.ImageFont:
    try:
        return ImageFont.load_default(size)
    except TypeError:  # Pillow before 10.1: one size only
        return ImageFont.load_default()


def _lines(draw: ImageDraw.ImageDraw, text: str, font: Any, max_width: float) -> list[str]:
    """The text broken at spaces into lines no wider than max_width (a long word stays whole)."""
    lines = []
    for paragraph in text.split("\n"):
        line = ""
        for word in paragraph.split():
            candidate = f"{line} {word}" if line else word
            if line and draw.textlength(candidate, font=font) > max_width:
                lines.append(line)
                line = word
            else:
                line = candidate
        lines.append(line)
    return lines


def preview(regions: list[dict], width: int, height: int, background: torch.Tensor | None) -> torch.Tensor:
    """The layout drawn over the dimmed background (or dark grey): outlines in each box's first palette colour,
    a strip of up to five palette swatches, a numbered tag and the description (text boxes: "text" first)."""
    if background is not None:
        bg = Image.fromarray((background[0].cpu().numpy() * 255).clip(0, 255).astype(np.uint8)).convert("RGB")
        scale = min(1.0, PREVIEW_LONG_EDGE / (max(bg.size) or 1))
        size = (max(1, round(bg.width * scale)), max(1, round(bg.height * scale)))
        canvas = ImageEnhance.Brightness(bg.resize(size, Image.LANCZOS)).enhance(PREVIEW_DIM).convert("RGBA")
    else:
        scale = min(1.0, PREVIEW_LONG_EDGE / (max(width, height) or 1))
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        grey = round(PREVIEW_DIM * 128)
        canvas = Image.new("RGBA", size, (grey, grey, grey, 255))
    rw, rh = size
    overlay = Image.new("RGBA", size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(overlay)
    font_size = max(10, round(rh / 64))
    font, tag_font = _font(font_size), _font(max(9, font_size - 2))
    for number, r in enumerate(regions, 1):
        palette = [c for c in (r["palette"] or []) if c]
        rgb = hex_rgb(palette[0]) if palette else GREY
        xs = sorted(max(0, min(rw, round(v * rw))) for v in (r["x"], r["x"] + r["w"]))
        ys = sorted(max(0, min(rh, round(v * rh))) for v in (r["y"], r["y"] + r["h"]))
        (x1, x2), (y1, y2) = xs, ys
        draw.rectangle([x1, y1, x2, y2], outline=rgb + (255,), width=2)
        swatches = palette[:5]
        if swatches and x2 - x1 > 2:
            step = (x2 - x1) / len(swatches)
            for i, color in enumerate(swatches):
                draw.rectangle(
                    [x1 + round(i * step), y1, x1 + round((i + 1) * step), y1 + max(5, font_size // 2)],
                    fill=hex_rgb(color),
                )
        tag = f"{number:02d}"
        draw.rectangle([x1, y1, x1 + draw.textlength(tag, font=tag_font) + 6, y1 + font_size + 2], fill=rgb + (255,))
        dark_tag = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2] > 140
        draw.text((x1 + 3, y1 + 1), tag, fill=(0, 0, 0, 255) if dark_tag else (255, 255, 255, 255), font=tag_font)
        body = r["desc"] or ""
        if r["type"] == "text" and r["text"]:
            body = f'"{r["text"]}"' + (f" — {body}" if body else "")
        if body and x2 - x1 > 8:
            y = y1 + font_size + 5
            for line in _lines(draw, body, font, x2 - x1 - 8):
                if y > y2:
                    break
                draw.text((x1 + 4, y), line, fill=legible_on_dark(rgb) + (255,), font=font)
                y += font_size + 2
    composed = Image.alpha_composite(canvas, overlay).convert("RGB")
    return torch.from_numpy(np.asarray(composed, dtype=np.float32) / 255.0).unsqueeze(0)


class CreateBoundingBoxes:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_bounding_boxes"
    FUNCTION = "execute"
    CATEGORY = "utilities"
    OUTPUT_NODE = True
    EXPERIMENTAL = True

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "width": (
                    "INT",
                    {
                        "default": 1024,
                        "min": 64,
                        "max": 16384,
                        "step": 16,
                        "tooltip": "Canvas width: the pixel grid of the boxes.",
                    },
                ),
                "height": (
                    "INT",
                    {
                        "default": 1024,
                        "min": 64,
                        "max": 16384,
                        "step": 16,
                        "tooltip": "Canvas height: the pixel grid of the boxes.",
                    },
                ),
                "editor_state": (
                    "BOUNDING_BOXES",
                    {
                        "socketless": False,
                        "tooltip": "The boxes drawn on the "
                        "canvas, each with its type, text, description and palette; background "
                        "first, foreground last.",
                    },
                ),
            },
            "optional": {
                "background": ("IMAGE", {"tooltip": "An image shown under the canvas and the preview."}),
                "bboxes": (
                    "BOUNDING_BOX,ARRAY,STRING",
                    {
                        "tooltip": "Boxes, elements or JSON text that set the "
                        "canvas; a new upstream value replaces the drawn boxes, edits win until it changes."
                    },
                ),
                "last_incoming": (
                    "BOUNDING_BOXES",
                    {
                        "tooltip": "The canvas's record of the upstream value it "
                        "last took; empty makes it take the bboxes input again."
                    },
                ),
            },
        }

    RETURN_TYPES = ("IMAGE", "BOUNDING_BOX", "ARRAY")
    RETURN_NAMES = ("preview", "bboxes", "elements")
    OUTPUT_TOOLTIPS = (None, None, None)
    DESCRIPTION = "Draws bounding boxes on a canvas: gives Ideogram prompt elements, pixel boxes and a preview."

    def execute(
        self,
        width: int,
        height: int,
        editor_state: Any = None,
        last_incoming: Any = None,
        background: torch.Tensor | None = None,
        bboxes: Any = None,
    ):
        incoming = incoming_boxes(bboxes, width, height)
        applied = last_incoming if isinstance(last_incoming, list) else []
        # a changed upstream value wins over the drawn boxes; otherwise the canvas's edits stand
        source = incoming if incoming and incoming != applied else (editor_state or [])
        regions = regions_of(source, width, height)
        ui: dict[str, Any] = {"dims": [width, height]}
        if incoming:
            ui["input_bboxes"] = incoming
        return {
            "ui": ui,
            "result": (
                preview(regions, width, height, background),
                pixel_frame(regions, width, height),
                elements_of(regions),
            ),
        }


NODE_CLASS_MAPPINGS = {"CreateBoundingBoxes": CreateBoundingBoxes}
NODE_DISPLAY_NAME_MAPPINGS = {"CreateBoundingBoxes": "Create Bounding Boxes"}
