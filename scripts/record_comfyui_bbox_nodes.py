"""Record what today's ComfyUI Draw BBoxes (comfy_extras/nodes_rtdetr.py) and Crop By BBoxes
(comfy_extras/nodes_sdpose.py) give for seeded images and boxes, as a test fixture. Both are newer than ComfyUI
0.10.0: the two classes' code, read from the newest Comfy-Org source (2026-12-04), is kept outside this
repository as a module with functions `draw_bboxes(bboxes, image)` and
`crop_by_bboxes(image, bboxes, width, height, padding)` and run in upstream ComfyUI 0.10.0's environment (commit
79cdbc81 of hiddenswitch/ComfyUI, its torchvision for ToPILImage / ToTensor, the same Pillow as this project's;
recipe in ../shared/reference/running-real-comfyui.md):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim> <venv>/bin/python \\
        /work/main/scripts/record_comfyui_bbox_nodes.py <that module> /work/main/tests/nodes/fixtures/comfyui_bbox_nodes.json.xz

The detector module that names the COCO classes is not readable here; the oracle uses the 80 COCO names in
their usual order, as this backend does. Outputs are float32 bytes (base64), compared bit for bit.
"""

from __future__ import annotations

import base64
import importlib.util
import sys

import torch


def inputs() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(34)
    return {
        "rgb": torch.rand(2, 40, 56, 3, generator=gen),
        "rgba": torch.rand(1, 36, 30, 4, generator=gen),
        "gray": torch.rand(1, 20, 24, 1, generator=gen),
    }


BOX = {"x": 4, "y": 5, "width": 20, "height": 14}
DETECTIONS = [
    {"x": 3.5, "y": 2.25, "width": 30.0, "height": 20.5, "label": "dog", "score": 0.876},
    {"x": 10, "y": 12, "width": 25, "height": 18, "label": "person", "score": 0.31},
    {"x": 1, "y": 30, "width": 12, "height": 6, "label": "unicorn", "score": 0.99},
]
# (case name, image or None, bboxes)
DRAW_CASES = [
    ("labelled detections on every frame", "rgb", DETECTIONS),
    ("per-frame lists", "rgb", [[BOX], [DETECTIONS[0]]]),
    ("one box on rgba", "rgba", BOX),
    ("no image: a canvas holding the boxes", None, [DETECTIONS]),
    ("nothing to draw", "rgb", []),
]
# (case name, image, bboxes, width, height, padding)
CROP_CASES = [
    ("union of two boxes with padding", "rgb", [[BOX, DETECTIONS[1]]], 24, 20, 6),
    ("frame without boxes skipped", "rgb", [[], [DETECTIONS[0]]], 16, 16, 0),
    ("one box for every frame", "rgb", BOX, 20, 12, 0),
    ("box outside: fallback square", "rgba", [[{"x": 200, "y": 200, "width": 5, "height": 5}]], 8, 8, 0),
]


def encode(tensor: torch.Tensor) -> dict:
    data = tensor.contiguous().to(torch.float32).numpy().tobytes()
    return {"shape": list(tensor.shape), "float32_base64": base64.b64encode(data).decode("ascii")}


def record(oracle_file: str) -> dict:
    sys.argv = [sys.argv[0], "--cpu"]
    sys.path.insert(0, ".")
    import comfy.options

    comfy.options.enable_args_parsing()
    import server  # noqa: F401
    import utils.install_util  # noqa: F401  (before nodes: comfy/ on the path shadows the utils package)

    import nodes  # noqa: F401

    spec = importlib.util.spec_from_file_location("bbox_oracle", oracle_file)
    oracle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(oracle)
    torch.set_num_threads(1)
    x = inputs()
    draw = {name: encode(oracle.draw_bboxes(bboxes, x[image] if image else None)) for name, image, bboxes in DRAW_CASES}
    crop = {
        name: encode(oracle.crop_by_bboxes(x[image], bboxes, w, h, pad))
        for name, image, bboxes, w, h, pad in CROP_CASES
    }
    return {"draw": draw, "crop": crop}


if __name__ == "__main__":
    oracle_file, target = sys.argv[1:3]
    cases = record(oracle_file)
    # imported here: tests load this module for its inputs without the scripts folder on sys.path
    from comfyui_recording import write_json

    write_json(
        target,
        {
            "source": "DrawBBoxes (comfy_extras/nodes_rtdetr.py) and CropByBBoxes (comfy_extras/nodes_sdpose.py) "
            "of the newest Comfy-Org source run in upstream ComfyUI 0.10.0's environment, Pillow "
            "13.0.0; scripts/record_comfyui_bbox_nodes.py",
            **cases,
        },
    )
