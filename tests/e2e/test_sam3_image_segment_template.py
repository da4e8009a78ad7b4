"""The web UI's SAM 3 image segmentation template (utility_image_segment_sam3 of the installed templates package),
as scripts/templates_render.py runs it (its subgraph unpacked, the tiny SAM 3.1 checkpoint of demo-models in place
of sam3.1_multiplex_fp16, the workspace's example.png as its image): CheckpointLoaderSimple -> CLIPTextEncode
("guitar") -> SAM3_Detect (threshold 0.5, 2 refinement passes) -> InvertMask -> JoinImageWithAlpha, saved as an RGBA
PNG (a SaveImage in place of its PreviewImage; its MaskPreview, which passes the mask on to InvertMask, left out and
bridged). From a fresh, empty workspace the image is
the same with the default executors and with `--executors 0`, and its alpha is not uniform (something was found). The
model itself is checked against ComfyUI's code in tests/models/test_sam3.py."""

from __future__ import annotations

import json

from scripts.templates_coverage import templates_dir
from tests.e2e.served import render_in_both_modes

TEMPLATE = "utility_image_segment_sam3"


def _prompt() -> dict:
    from comfy_bridge.registry import build_registry
    from scripts.templates_render import tiny_prompt

    workflow = json.loads((templates_dir() / f"{TEMPLATE}.json").read_text())
    prompt, _ = tiny_prompt(workflow, build_registry(None))
    previews = {key: node["inputs"]["mask"] for key, node in prompt.items() if node["class_type"] == "MaskPreview"}
    kept = {}
    for key, node in prompt.items():
        if key in previews:
            continue
        node = {
            **node,
            "inputs": {k: previews.get(v[0], v) if isinstance(v, list) else v for k, v in node["inputs"].items()},
        }
        if node["class_type"] == "PreviewImage":
            node = {"class_type": "SaveImage", "inputs": {**node["inputs"], "filename_prefix": "sam3"}}
        kept[key] = node
    return kept


def test_image_segment_template_in_both_executor_modes(tmp_path) -> None:
    prompt = _prompt()
    assert sorted(n["class_type"] for n in prompt.values()) == [
        "CLIPTextEncode",
        "CheckpointLoaderSimple",
        "InvertMask",
        "JoinImageWithAlpha",
        "LoadImage",
        "SAM3_Detect",
        "SaveImage",
    ]
    (detect,) = [n for n in prompt.values() if n["class_type"] == "SAM3_Detect"]
    assert (detect["inputs"]["threshold"], detect["inputs"]["refine_iterations"]) == (0.5, 2)
    image = render_in_both_modes(tmp_path, prompt)
    assert image.ndim == 3 and image.shape[2] == 4
    alpha = image[..., 3]
    assert alpha.min() != alpha.max()
