"""Record what upstream ComfyUI 0.10.0's Save SVG node writes (file names, file text with the prompt and workflow
embedded) as a test fixture.

Run inside ComfyUI 0.10.0's own environment (commit 79cdbc81 of hiddenswitch/ComfyUI; it imports ComfyUI's
modules, nothing of ComfyUI is copied here; recipe in ../shared/reference/running-real-comfyui.md):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim> <venv>/bin/python \\
        /work/main/scripts/record_comfyui_save_svg.py /work/main/tests/nodes/fixtures/comfyui_save_svg.json

Each case (`CASES`, shared with the test) saves its SVG texts into an empty output folder; the fixture keeps the
UI result and every file written, by name.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile

SQUARE = '<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><rect width="4" height="4"/></svg>'
NESTED = (
    '<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 8 8">\n'
    '  <svg x="2" y="2"><circle r="1"/></svg>\n</svg>\n'
)
# (case name, SVG texts, filename_prefix, prompt, extra_pnginfo)
CASES = [
    ("plain", [SQUARE], "svg/ComfyUI", None, None),
    (
        "prompt and workflow",
        [SQUARE, NESTED],
        "svg/run_%batch_num%",
        {"1": {"class_type": "X", "inputs": {"é": 1}}},
        {"workflow": {"nodes": [], "version": 0.4}},
    ),
    ("workflow only", ["no svg tag here"], "flat", None, {"workflow": {"links": [[1, 2]]}}),
]


def record() -> dict:
    sys.argv = [sys.argv[0], "--cpu"]
    sys.path.insert(0, ".")
    import comfy.options

    comfy.options.enable_args_parsing()
    import folder_paths
    import server  # noqa: F401
    import utils.install_util  # noqa: F401  (before nodes: comfy/ on the path shadows the utils package)
    from comfy_api.latest import io as comfy_io
    from comfy_api.latest._util import SVG
    from comfy_extras.nodes_images import SaveSVGNode

    import nodes  # noqa: F401

    out = {}
    for name, texts, prefix, prompt, extra in CASES:
        with tempfile.TemporaryDirectory() as folder:
            folder_paths.set_output_directory(folder)
            node = SaveSVGNode.PREPARE_CLASS_CLONE(
                {"hidden_inputs": {comfy_io.Hidden.prompt: prompt, comfy_io.Hidden.extra_pnginfo: extra}}
            )
            result = node.execute(SVG([io.BytesIO(t.encode("utf-8")) for t in texts]), prefix)
            files = {}
            for root, _, names in os.walk(folder):
                for file in names:
                    path = os.path.join(root, file)
                    with open(path, encoding="utf-8") as f:
                        files[os.path.relpath(path, folder)] = f.read()
            ui = json.loads(json.dumps(result.ui, default=lambda v: dict(v)))
            out[name] = {"ui": ui, "files": files}
    return out


if __name__ == "__main__":
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump(
            {
                "source": "upstream ComfyUI 0.10.0 (commit 79cdbc81 of hiddenswitch/ComfyUI), "
                "comfy_extras.nodes_images.SaveSVGNode, recorded by scripts/record_comfyui_save_svg.py",
                "cases": record(),
            },
            f,
            indent=1,
            ensure_ascii=False,
        )
        f.write("\n")
