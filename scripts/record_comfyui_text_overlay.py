"""Record what today's ComfyUI Draw Text Overlay (comfy_extras/nodes_text_overlay.py, newer than ComfyUI 0.10.0)
gives for seeded images, as a test fixture.

The node is not in a released ComfyUI that runs here, so the newest Comfy-Org source file of it (read
2026-12-04, commit b45873d0) is placed outside this repository and imported into upstream ComfyUI 0.10.0's
environment (commit 79cdbc81 of hiddenswitch/ComfyUI; recipe in ../shared/reference/running-real-comfyui.md),
with the same Pillow as this project's (the text is drawn by Pillow's FreeType):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim> <venv>/bin/python \\
        /work/main/scripts/record_comfyui_text_overlay.py <newest nodes_text_overlay.py> <DejaVuSans.ttf> \\
        /work/main/tests/nodes/fixtures/comfyui_text_overlay.json

The font file is matplotlib's DejaVuSans.ttf (matplotlib is a dependency here, so the test finds the same
file); "" is Pillow's default font. Outputs are stored as float32 bytes (base64), compared bit for bit.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import shutil
import sys
import tempfile

import torch

FONT = "DejaVuSans.ttf"


def inputs() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(34)
    return {
        "rgb": torch.rand(1, 30, 48, 3, generator=gen),
        "rgba": torch.rand(2, 26, 40, 4, generator=gen),
        "wide": torch.rand(1, 24, 90, 3, generator=gen),
        "tall": torch.rand(1, 64, 40, 3, generator=gen),
    }


LONG_TEXT = "The quick brown fox"
# (case name, input image, text, font, font_size, color, position, align, outline)
CASES = [
    ("default font top left", "rgb", "Hello ComfyUI", "", 5.0, "#ffffff", "top", "left", True),
    # 20.3125% of 64 px is 13 px: the size SHRINK's text reaches (19, 17, 15, 13 px), where it fits
    ("ttf bottom center at 13 px", "tall", LONG_TEXT, FONT, 20.3125, "#ff8800", "bottom", "center", False),
    ("ttf two lines spaced", "tall", "ab\ncd", FONT, 25.0, "#2040ff", "top", "center", True),
    ("rgba right long word and tab", "rgba", "Supercalifragilistic\\tx yz", FONT, 12.5, "red", "top", "right", True),
    ("wide two lines", "wide", "left\nright side", "", 20.0, "#00ff0080", "bottom", "left", True),
    ("blank text", "rgb", "  \n ", FONT, 5.0, "#ffffff", "top", "left", True),
]
# Text too tall at 30% (19 px): the newest source's shrink loop passes its font object back as a file name on
# the second pass and raises TypeError; recorded as such. The test compares this backend's shrunk render with
# the render ComfyUI gives when asked for the size the shrink reaches ("ttf bottom center at 13 px").
SHRINK = ("ttf bottom center shrinks", "tall", LONG_TEXT, FONT, 30.0, "#ff8800", "bottom", "center", False)


def encode(tensor: torch.Tensor) -> dict:
    data = tensor.contiguous().to(torch.float32).numpy().tobytes()
    return {"shape": list(tensor.shape), "float32_base64": base64.b64encode(data).decode("ascii")}


def record(node_file: str, font_file: str) -> dict:
    sys.argv = [sys.argv[0], "--cpu"]
    sys.path.insert(0, ".")
    import comfy.options

    comfy.options.enable_args_parsing()
    import folder_paths
    import server  # noqa: F401
    import utils.install_util  # noqa: F401  (before nodes: comfy/ on the path shadows the utils package)

    import nodes  # noqa: F401

    fonts = tempfile.mkdtemp()
    shutil.copy(font_file, os.path.join(fonts, FONT))
    folder_paths.folder_names_and_paths["fonts"] = ([fonts], {".ttf", ".otf"})
    spec = importlib.util.spec_from_file_location("newest_text_overlay", node_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.set_num_threads(1)
    x = inputs()
    out = {}
    for name, image, text, font, size, color, position, align, outline in CASES:
        result = module.TextOverlay.execute(x[image], text, font, size, color, position, align, outline).result[0]
        out[name] = encode(result)
    name, image, text, font, size, color, position, align, outline = SHRINK
    try:
        module.TextOverlay.execute(x[image], text, font, size, color, position, align, outline)
        out[name] = {"error": None}
    except TypeError as ex:
        out[name] = {"error": f"TypeError: {ex}"}
    return out


if __name__ == "__main__":
    node_file, font_file, target = sys.argv[1:4]
    cases = record(node_file, font_file)
    with open(target, "w", encoding="utf-8") as f:
        json.dump(
            {
                "source": "today's ComfyUI comfy_extras/nodes_text_overlay.py (Comfy-Org commit b45873d0) run in "
                "upstream ComfyUI 0.10.0's environment, Pillow 13.0.0; scripts/record_comfyui_text_overlay.py",
                "cases": cases,
            },
            f,
            indent=1,
        )
        f.write("\n")
