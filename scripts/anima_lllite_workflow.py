"""Write workflows_json/anima_lllite_inpainting.json: the web UI's "Anima LLLite image inpainting" template
(image_anima_lllite_image_inpainting of the installed comfyui-workflow-templates-json package) in API format, from
its own graph as scripts/templates_render.py converts it (subgraph unpacked, anima-tiny's transformer, Qwen3 0.6B
and turbo LoRA, qwen-image-tiny's VAE and the tiny inpainting LLLite substituted, 64x64), with a fixed seed and 3
steps (the turbo branch, on as shipped: 2 steps at cfg 1). LoadImage reads the workspace's example.png; the Painter
reads PAINTING (templates_render's painting: a white disc on a transparent canvas, the file the web UI uploads when
one paints, written into the workspace's input folder by write_painting), and its mask reaches AnimaLLLiteApply
through MaskPreview's output as in the template. The template's ImageCompare and its unconnected
ResizeImageMaskNode are left out, so SaveImage is the one image output.

    python scripts/anima_lllite_workflow.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scripts.templates_render import PAINTING, write_painting  # noqa: E402

TEMPLATE = "image_anima_lllite_image_inpainting"
OUT = REPO / "workflows_json" / "anima_lllite_inpainting.json"
LEFT_OUT = {"ImageCompare", "ResizeImageMaskNode"}
STEPS = {30: 3, 8: 2}  # the template's step primitives (base, turbo) -> tiny counts
SEED = 42
__all__ = ["PAINTING", "write_painting", "workflow"]


def workflow() -> dict:
    """The API prompt (deterministic: the builtin registry, no workspace)."""
    from comfy_bridge.registry import build_registry
    from scripts.templates_coverage import templates_dir
    from scripts.templates_render import tiny_prompt

    template = json.loads((templates_dir() / f"{TEMPLATE}.json").read_text())
    prompt, tripwires = tiny_prompt(template, build_registry(None, load_custom_nodes=False))
    assert not tripwires, tripwires
    prompt = {k: v for k, v in prompt.items() if v["class_type"] not in LEFT_OUT}
    for node in prompt.values():
        inputs = node["inputs"]
        if node["class_type"] == "PrimitiveInt" and inputs["value"] in STEPS:
            inputs["value"] = STEPS[inputs["value"]]
        if node["class_type"] == "KSampler":
            inputs["seed"] = SEED
    return prompt


def main() -> None:
    OUT.write_text(json.dumps(workflow(), indent=2) + "\n")


if __name__ == "__main__":
    main()
