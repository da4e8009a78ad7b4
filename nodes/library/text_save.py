"""ComfyUI's comfy_extras.nodes_text: Save Text writes a text into the output folder as .txt, .csv, .md or .json
(a JSON text pretty-printed, any other text as it is), shows it and its file in the UI, and passes it on."""

from __future__ import annotations

import json
import os
from typing import Any

from nodes import output_claims
from nodes.image_io import save_image_path
from nodes.workspace import active

FORMATS = ["txt", "csv", "md", "json"]


class SaveText:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_text"
    FUNCTION = "execute"
    CATEGORY = "text"
    OUTPUT_NODE = True
    RETURN_TYPES = ("STRING",)
    RETURN_NAMES = ("text",)
    OUTPUT_TOOLTIPS = (None,)
    SEARCH_ALIASES = ["save text", "write text", "export text"]
    DESCRIPTION = "Writes the text to a file of the output folder and passes it on."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "text": ("STRING", {"forceInput": True, "multiline": False}),
                "filename_prefix": ("STRING", {"default": "ComfyUI", "multiline": False}),
                "format": ("COMBO", {"default": "txt", "multiselect": False, "options": FORMATS}),
            },
            "hidden": {"prompt": ("PROMPT",), "extra_pnginfo": ("EXTRA_PNGINFO",)},
        }

    def execute(self, text: str, filename_prefix: str, format: str, **hidden: Any):
        if format not in FORMATS:
            raise ValueError(f"Save Text: format {format!r} is not one of {FORMATS}")
        base = active().output_dir
        folder, stem, counter, subfolder, _ = save_image_path(filename_prefix, base, 1, 1)
        # a re-run after the head was killed writes over the name the dead run took (as the image savers)
        taken = output_claims.claim(folder, stem, counter, 1)
        if taken.folder != folder:
            subfolder = os.path.relpath(taken.folder, os.path.abspath(base))
        file = f"{taken.stem}_{taken.counter:05}.{format}"
        body = text
        if format == "json":
            try:
                body = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
            except json.JSONDecodeError:
                pass  # not JSON: written as it is, as ComfyUI does
        with open(os.path.join(taken.folder, file), "w", encoding="utf-8") as f:
            f.write(body)
        return {
            "ui": {"text": [text], "files": [{"filename": file, "subfolder": subfolder, "type": "output"}]},
            "result": (text,),
        }


NODE_CLASS_MAPPINGS = {"SaveText": SaveText}
NODE_DISPLAY_NAME_MAPPINGS = {"SaveText": "Save Text"}
