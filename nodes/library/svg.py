"""ComfyUI's SVG values and Save SVG (`comfy_extras.nodes_images`): an SVG value holds one or more SVG documents
(as byte streams); Save SVG writes each into the output folder as <prefix>_<counter>_.svg with the prompt and
workflow embedded as JSON in a <metadata> element after every opening <svg> tag, as ComfyUI 0.10.0 writes them
(ComfyUI writes it whether or not --disable-metadata is set; so does this node)."""

from __future__ import annotations

import json
import os
import re
from io import BytesIO
from typing import Any

from nodes import output_claims
from nodes.image_io import save_image_path
from nodes.workspace import active

SVG_TAG = re.compile(r"(<svg[^>]*>)")


class SVG:
    """SVG documents, one byte stream each (ComfyUI's comfy_api SVG type)."""

    def __init__(self, data: list[BytesIO]) -> None:
        self.data = data

    def combine(self, other: SVG) -> SVG:
        return SVG(self.data + other.data)

    @staticmethod
    def combine_all(svgs: list[SVG]) -> SVG:
        return SVG([stream for svg in svgs for stream in svg.data])


def metadata_element(prompt: Any, extra_pnginfo: dict | None) -> str | None:
    """The <metadata> block ComfyUI puts after an opening <svg> tag (indented JSON in CDATA); None when there is
    nothing to embed."""
    metadata = {**({"prompt": prompt} if prompt is not None else {}), **(extra_pnginfo or {})}
    if not metadata:
        return None
    # ComfyUI's exact layout, so a file written here reads back byte for byte like one written there
    return (
        "  <metadata>\n"
        + " " * 16
        + "<![CDATA[\n"
        + " " * 12
        + json.dumps(metadata, indent=2)
        + "\n"
        + " " * 16
        + "]]>\n"
        + " " * 12
        + "</metadata>\n"
        + " " * 12
    )


class SaveSVGNode:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_images"
    FUNCTION = "execute"
    CATEGORY = "image/save"
    OUTPUT_NODE = True
    RETURN_TYPES = ()
    SEARCH_ALIASES = ["export vector", "save vector graphics"]
    DESCRIPTION = "Writes SVG documents into the output folder, with the prompt and workflow embedded."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "svg": ("SVG", {}),
                "filename_prefix": (
                    "STRING",
                    {
                        "default": "svg/ComfyUI",
                        "multiline": False,
                        "tooltip": "Start of the file names; may hold a subfolder and %date:...% style variables.",
                    },
                ),
            },
            "hidden": {"prompt": ("PROMPT",), "extra_pnginfo": ("EXTRA_PNGINFO",)},
        }

    def execute(
        self, svg: SVG, filename_prefix: str = "svg/ComfyUI", prompt: Any = None, extra_pnginfo: dict | None = None
    ):
        streams = getattr(svg, "data", None)
        if not isinstance(streams, list):
            raise ValueError(
                f"Save SVG: svg must be an SVG value (documents as byte streams), not {type(svg).__name__}"
            )
        base = active().output_dir
        folder, stem, counter, subfolder, _ = save_image_path(filename_prefix, base)
        # a re-run after the head was killed writes over the names the dead run took (as the image savers)
        taken = output_claims.claim(folder, stem, counter, len(streams))
        if taken.folder != folder:
            subfolder = os.path.relpath(taken.folder, os.path.abspath(base))
        counter, block = taken.counter, metadata_element(prompt, extra_pnginfo)
        results = []
        for batch_number, stream in enumerate(streams):
            file = f"{taken.stem.replace('%batch_num%', str(batch_number))}_{counter:05}_.svg"
            stream.seek(0)
            text = stream.read().decode("utf-8")
            if block is not None:
                text = SVG_TAG.sub(lambda tag: tag.group(1) + "\n" + block, text)
            with open(os.path.join(taken.folder, file), "wb") as f:
                f.write(text.encode("utf-8"))
            results.append({"filename": file, "subfolder": subfolder, "type": "output"})
            counter += 1
        return {"ui": {"images": results}}


NODE_CLASS_MAPPINGS = {"SaveSVGNode": SaveSVGNode}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
