"""Write workflows_json/qwen_image21_edit.ui.json and .json: the web UI's "Qwen Image 2.1 image edit" template
(image_qwen_image_2_1_image_edit of the installed comfyui-workflow-templates-json package) with its own node
graph, its subgraph unpacked in place by the templates renderer's unpacker (scripts/templates_render.py: the
instance's promoted widget values, saved by a newer frontend for every widget-typed subgraph input, become
primitive nodes; a PreviewAny's outgoing link starts at what it shows), the tiny demo files substituted for the
downloads, both pictures the workspace's example.png (128x128) and a fixed seed. Everything else is as shipped:
resolution 0 (the references keep their size), 25 euler/simple steps at cfg 1, the latent from the encoder (the
custom-size switch off), the prompt enhancer off (its lazy TextGenerate branch never runs; its Qwen 3.5 file is only
validated, the tiny Qwen3-VL file's name standing in). The template's prompt, which feeds the enhancer switch's
widgetless input, arrives through a PrimitiveStringMultiline node. The API format is our UI converter's output.

    python scripts/qwen_image21_edit_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "image_qwen_image_2_1_image_edit"
NAME = "qwen_image21_edit"
SUBSTITUTE = {
    "UNETLoader": [(0, "qwen_image_2.1_tiny.safetensors")],
    "CLIPLoader": [(0, "qwen3vl_8b_tiny.safetensors")],
    "VAELoader": [(0, "qwen_image_2.1_vae_tiny.safetensors")],
    "LoadImage": [(0, "example.png")],
}
PROMOTED = {"unet_name": 14, "clip_name": 15, "vae_name": 16, "clip_name_1": 19, "seed": 13}
TINY = {
    "unet_name": "qwen_image_2.1_tiny.safetensors",
    "clip_name": "qwen3vl_8b_tiny.safetensors",
    "vae_name": "qwen_image_2.1_vae_tiny.safetensors",
    "clip_name_1": "qwen3vl_8b_tiny.safetensors",
    "seed": 42,
}


def tiny_template() -> dict:
    from scripts.templates_coverage import templates_dir
    from scripts.templates_render import flat_workflow

    workflow = json.loads((templates_dir() / f"{TEMPLATE}.json").read_text())
    (sg,) = workflow["definitions"]["subgraphs"]
    (outer,) = [n for n in workflow["nodes"] if n["type"] == sg["id"]]
    names = [i["name"] for i in sg["inputs"] if i["type"] != "IMAGE"]
    for name, value in TINY.items():  # the instance's promoted values, in the subgraph's widget-input order
        assert names[PROMOTED[name]] == name, f"the template's promoted {name} moved"
        outer["widgets_values"][PROMOTED[name]] = value
    for node in workflow["nodes"] + sg["nodes"]:
        for index, value in SUBSTITUTE.get(node["type"], []):
            node["widgets_values"][index] = value
    flat = flat_workflow(workflow)
    nodes = {n["id"]: n for n in flat["nodes"]}
    for link, origin, _, target, slot, _ in flat["links"]:
        node = nodes[origin]
        if node["type"] == "PrimitiveNode" and "widget" not in nodes[target]["inputs"][slot]:
            _as_string_node(node)
            node["outputs"][0]["links"].append(link)
    return flat


def _as_string_node(node: dict) -> None:
    """A promoted text value as a PrimitiveStringMultiline node (a real node: the switch input it feeds has no
    widget for a frontend primitive to attach to)."""
    node.update(
        type="PrimitiveStringMultiline",
        pos=[0, 0],
        size=[400, 200],
        flags={},
        order=0,
        outputs=node.get("outputs") or [{"name": "STRING", "type": "STRING", "links": []}],
        properties={"Node name for S&R": "PrimitiveStringMultiline"},
    )


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
