"""Today's FLUX 3 template nodes. The newest ComfyUI source of these classes was not readable here (the code index
holds no file declaring them); their interfaces follow what is published about them: the web UI's FLUX 3
templates (comfyui-workflow-templates-json 0.1.123: widget names, order and values, socket names and types) and
their documentation in comfyui-embedded-docs 0.5.15 (inputs, outputs, defaults, ranges). What neither gives
(category, Python module) is chosen here and listed in docs/nodes.md.

Flux3LayoutPrompt appends Create Bounding Boxes' elements to the prompt as the box table FLUX 3 reads: the form
BFL's reference code gives the model (diffusers 0.42's flux3 prompt_upsampler, adapted from BFL's bbox.py): the
caption, a space, and a JSON list of {"id": "obj_N", "bbox": [y_min, x_min, y_max, x_max] on a 0-1000 canvas,
"desc": ...}, cited in the prompt as <obj_N>. A text element's text leads its description in double quotes (the
form FLUX 3's captions give rendered text); palettes are dropped, as the documentation says. No elements: the
prompt comes back unchanged."""

from __future__ import annotations

import json
import numbers
from typing import Any

CANVAS = 1000


def _row(index: int, element: Any) -> dict[str, Any]:
    where = f"element: item {index}"
    if not isinstance(element, dict):
        raise ValueError(f"{where} is {type(element).__name__}, expected an element of Create Bounding Boxes")
    box = element.get("bbox")
    if (
        not isinstance(box, (list, tuple))
        or len(box) != 4
        or not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in box)
    ):
        raise ValueError(f"{where} has no bbox [y_min, x_min, y_max, x_max] on the 0-{CANVAS} grid: {box!r}")
    desc = str(element.get("desc") or "").strip()
    text = element.get("text")
    if element.get("type") == "text" and text:
        desc = f'"{text}"' + (f", {desc}" if desc else "")
    return {"id": f"obj_{index + 1}", "bbox": [int(round(max(0, min(CANVAS, v)))) for v in box], "desc": desc}


def layout_prompt(prompt: str, elements: Any) -> str:
    """`prompt` with the elements' box table appended (unchanged when there are none)."""
    if elements is None:
        elements = []
    if not isinstance(elements, (list, tuple)):
        raise ValueError(
            f"element: expected the ARRAY of Create Bounding Boxes' elements, got {type(elements).__name__}"
        )
    if not elements:
        return prompt
    rows = [_row(i, e) for i, e in enumerate(elements)]
    return f"{prompt.strip()} {json.dumps(rows, ensure_ascii=False)}"


class Flux3LayoutPrompt:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_flux"
    FUNCTION = "execute"
    CATEGORY = "advanced/conditioning/flux"
    DESCRIPTION = (
        "Appends the elements drawn in Create Bounding Boxes to the prompt as FLUX 3's box table (id, box, "
        "description); cite box N as <obj_N>."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "prompt": (
                    "STRING",
                    {"multiline": True, "tooltip": "What to draw; <obj_N> in it names the N-th element's box."},
                ),
                "element": (
                    "ARRAY",
                    {
                        "tooltip": "Create Bounding Boxes' elements; their palettes are dropped (name colors in the text)."
                    },
                ),
            }
        }

    RETURN_TYPES = ("STRING",)
    RETURN_NAMES = ("prompt",)

    def execute(self, prompt: str, element: Any) -> tuple[str]:
        return (layout_prompt(prompt, element),)


NODE_CLASS_MAPPINGS = {"Flux3LayoutPrompt": Flux3LayoutPrompt}
NODE_DISPLAY_NAME_MAPPINGS = {"Flux3LayoutPrompt": "FLUX 3 Image Layout Prompt"}
