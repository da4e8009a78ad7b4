"""MOSS-Image Layout Prompt (MOSSImageLayoutPrompt): Create Bounding Boxes' elements as the JSON layout prompt that
MOSS-Image reads. ComfyUI's source of the class was not readable here (no ComfyUI that runs here has it, the code
index holds no MOSS node module), so the interface is the one published for it: the web UI's MOSS-Image bbox
templates (comfyui-workflow-templates-json 0.1.123: widgets prompt, width, height, character_boxes; socket element
of type ARRAY; output prompt STRING) and comfyui-embedded-docs 0.5.15 (ranges, defaults, what the output holds).
Category and Python module are chosen here and listed in docs/nodes.md.

The layout itself is MOSS-Image's published prompt form (as moss-image-mlx 0.2.0's layout checker reads it, "mirrors
the official pipeline"): {"summary": {"caption": ...}, "items": [...], "bbox_format": "yxyx", "bbox_coord_space":
"abs_centralized"}, each item's bbox [y_min, x_min, y_max, x_max] in pixels of the target canvas with its centre as
the origin. Each item has a label (text for a box with text, character for a box named in character_boxes, object
otherwise), its caption (the element's desc), the text to render for text boxes and the element's colour palette
when it has one. No elements: the prompt comes back unchanged."""

from __future__ import annotations

import json
import numbers
import re
from typing import Any

GRID = 1000  # Create Bounding Boxes' elements are on a 0..1000 grid
SIDE = ("INT", {"default": 1024, "min": 16, "max": 16384, "step": 16})


def character_numbers(text: str) -> set[int]:
    """The 1-based box numbers in `text`; any separator works, as every number is read."""
    return {int(n) for n in re.findall(r"\d+", text or "")}


def _centred(box: Any, width: int, height: int, where: str) -> list[int]:
    if (
        not isinstance(box, (list, tuple))
        or len(box) != 4
        or not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in box)
    ):
        raise ValueError(f"{where} has no bbox [y_min, x_min, y_max, x_max] on the 0-{GRID} grid: {box!r}")
    y0, x0, y1, x1 = box
    # MOSS-Image's boxes are absolute pixels about the canvas centre (x right, y down)
    return [
        round(y0 * height / GRID - height / 2),
        round(x0 * width / GRID - width / 2),
        round(y1 * height / GRID - height / 2),
        round(x1 * width / GRID - width / 2),
    ]


def _item(number: int, element: Any, width: int, height: int, characters: set[int]) -> dict[str, Any]:
    where = f"element: item {number}"
    if not isinstance(element, dict):
        raise ValueError(f"{where} is {type(element).__name__}, expected an element of Create Bounding Boxes")
    text = element.get("text") or ""
    if element.get("type") == "text" and text:
        label = "text"
    elif number in characters:
        label = "character"
    else:
        label = "object"
    item: dict[str, Any] = {"label": label, "bbox": _centred(element.get("bbox"), width, height, where)}
    if label == "text":
        item["text"] = str(text)
    item["caption"] = str(element.get("desc") or "")
    palette = element.get("color_palette")
    if palette:
        item["palette"] = list(palette)
    return item


def layout_prompt(prompt: str, elements: Any, width: int, height: int, character_boxes: str = "") -> str:
    """MOSS-Image's JSON layout of `elements` on a width x height canvas, or `prompt` when there are none."""
    if elements is None:
        elements = []
    if not isinstance(elements, (list, tuple)):
        raise ValueError(
            f"element: expected the ARRAY of Create Bounding Boxes' elements, got {type(elements).__name__}"
        )
    for name, side in (("width", width), ("height", height)):
        if not isinstance(side, int) or isinstance(side, bool) or side < 16:
            raise ValueError(f"{name}: expected a canvas side of at least 16 pixels, got {side!r}")
    if not elements:
        return prompt
    characters = character_numbers(character_boxes)
    layout = {
        "summary": {"caption": prompt},
        "items": [_item(i + 1, e, width, height, characters) for i, e in enumerate(elements)],
        "bbox_format": "yxyx",
        "bbox_coord_space": "abs_centralized",
    }
    return json.dumps(layout, ensure_ascii=False)


class MOSSImageLayoutPrompt:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_moss_image"
    FUNCTION = "execute"
    CATEGORY = "advanced/conditioning/moss_image"
    DESCRIPTION = (
        "Turns the elements drawn in Create Bounding Boxes into MOSS-Image's JSON layout prompt (caption, one item "
        "per box, boxes in yxyx pixels about the canvas centre)."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "prompt": ("STRING", {"multiline": True, "tooltip": "The whole image; the layout's caption."}),
                "element": ("ARRAY", {"tooltip": "Create Bounding Boxes' elements."}),
                "width": (SIDE[0], {**SIDE[1], "tooltip": "Width of the image to generate."}),
                "height": (SIDE[0], {**SIDE[1], "tooltip": "Height of the image to generate."}),
                "character_boxes": (
                    "STRING",
                    {"default": "", "tooltip": 'Numbers of the boxes to label as characters, e.g. "1, 3".'},
                ),
            }
        }

    RETURN_TYPES = ("STRING",)
    RETURN_NAMES = ("prompt",)

    def execute(self, prompt: str, element: Any, width: int, height: int, character_boxes: str = "") -> tuple[str]:
        return (layout_prompt(prompt, element, width, height, character_boxes),)


NODE_CLASS_MAPPINGS = {"MOSSImageLayoutPrompt": MOSSImageLayoutPrompt}
NODE_DISPLAY_NAME_MAPPINGS = {"MOSSImageLayoutPrompt": "MOSS-Image Layout Prompt"}
