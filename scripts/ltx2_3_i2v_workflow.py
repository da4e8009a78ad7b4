"""Write workflows_json/ltx2_3_i2v.ui.json and .json: the web UI's "LTX-2.3 image to video" template
(video_ltx2_3_i2v of the installed comfyui-workflow-templates-json package) with its own node graph, its subgraph
unpacked in place by the templates renderer's unpacker (scripts/templates_render.py), the tiny demo files put in
place of the downloads by the renderer's rules (ltx2-tiny's checkpoint, Gemma 3, latent upsampler and LoRA), the
picture the workspace's example.png and the noise seeds fixed. The picture's longer side is scaled to 128 instead of
1536. The Gemma LoRA sits on the prompt enhancer's branch,
which the template ships switched off (its lazy TextGenerateLTX2Prompt never runs): it is only validated, the tiny
LTX-2 LoRA's name standing in. Sizes shrink as the renderer shrinks them (Width and Height 128, Duration 1 s: 25
frames at 25 fps); everything else is as shipped: the two-pass distilled schedule (ManualSigmas, euler, cfg 1),
the x2 latent upsampler between the passes, the LoRA at 0.5, VAE Decode (Tiled), the audio VAE from the checkpoint,
CreateVideo and SaveVideo. The API format is our UI converter's output.

    python scripts/ltx2_3_i2v_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "video_ltx2_3_i2v"
NAME = "ltx2_3_i2v"
SEED = 42
LONGER_SIDE = 128
GEMMA_LORA = re.compile(r"^gemma-3-12b-it.*lora")


def tiny_template(template: str = TEMPLATE) -> dict:
    """The template's graph with the tiny files, example pictures, fixed seeds and shrunk sizes (the LTX-2.3
    first/last-frame template, scripts/ltx2_3_flf2v_workflow.py, goes through the same rules)."""
    from scripts.templates_coverage import templates_dir
    from scripts.templates_render import IMAGE_FILE, MODEL_FILE, SHRINK_TITLES, demo_file, flat_workflow

    flat = flat_workflow(json.loads((templates_dir() / f"{template}.json").read_text()))
    values = [v for n in flat["nodes"] for v in n.get("widgets_values") or [] if isinstance(v, str)]
    asked = [v for v in values if MODEL_FILE.search(v)]
    titles = {n["id"]: str(n.get("title", "")).strip().lower() for n in flat["nodes"]}
    fed_by = {target: origin for _, origin, _, target, _, _ in flat["links"]}
    for node in flat["nodes"]:
        widgets = node.get("widgets_values")
        if not isinstance(widgets, list):
            continue
        for i, value in enumerate(widgets):
            if isinstance(value, str) and GEMMA_LORA.search(value):
                widgets[i] = "ltx-2-19b-lora_tiny.safetensors"
            elif isinstance(value, str) and MODEL_FILE.search(value):
                widgets[i] = demo_file(value, asked)
            elif isinstance(value, str) and IMAGE_FILE.search(value):
                widgets[i] = "example.png"
        if node["type"] == "RandomNoise":
            widgets[:2] = [SEED, "fixed"]
        if node["type"] == "ResizeImageMaskNode" and widgets[0] == "scale longer dimension":
            # 1536 would blow the 128-pixel picture up only for LTXVImgToVideoInplace to shrink it back; torch's
            # bilinear resize from 1536 rounds differently with the head's thread count (serve vs in-process)
            widgets[1] = min(widgets[1], LONGER_SIDE)
        title = titles[node["id"]] or titles.get(_consumer(flat, node["id"]), "")
        if node["type"] in ("PrimitiveInt", "PrimitiveNode") and title in SHRINK_TITLES and isinstance(widgets[0], int):
            widgets[0] = SHRINK_TITLES[title](widgets[0])
        if node["type"] == "PrimitiveNode" and fed_by and _feeds_noise_seed(flat, node["id"]):
            widgets[0] = SEED
    return flat


def _consumer(flat: dict, node_id: int) -> int | None:
    """The node a primitive's value goes to (a promoted value's PrimitiveNode feeds one PrimitiveInt)."""
    return next((target for _, origin, _, target, _, _ in flat["links"] if origin == node_id), None)


def _feeds_noise_seed(flat: dict, node_id: int) -> bool:
    nodes = {n["id"]: n for n in flat["nodes"]}
    for _, origin, _, target, slot, _ in flat["links"]:
        if origin == node_id and nodes[target]["type"] == "RandomNoise":
            return nodes[target]["inputs"][slot].get("name") == "noise_seed"
    return False


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
