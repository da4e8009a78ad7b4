"""Write workflows_json/qwen_image_layered.ui.json and .json (and qwen_image_layered_control): the web UI's
"Qwen-Image-Layered" templates (image_qwen_image_layered and image_qwen_image_layered_control of the installed
comfyui-workflow-templates-json package) with their subgraphs unpacked in place (as the web UI's "unpack
subgraph" does; scripts/qwen_image_edit_workflow.py's unpacking), the tiny demo files substituted for the
downloads, the example input image, a fixed seed, 4 steps and the input scaled to at most 128 pixels (the
templates ask 20 steps at 640 pixels, too slow for tests on a CPU). The layered template's muted "Text to
Layers" subgraph instance (mode 4, never run) and its SaveImage are left out: its inner nodes would run once
unpacked. The API format is our UI converter's output.

    python scripts/qwen_image_layered_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
# Widget values replaced, by node class: (widget index, value).
SUBSTITUTE = {
    "UNETLoader": [(0, "qwen_image_layered_tiny.safetensors")],
    "CLIPLoader": [(0, "qwen_2.5_vl_7b_tiny.safetensors")],
    "VAELoader": [(0, "qwen_image_layered_vae_tiny.safetensors")],
    "LoadImage": [(0, "example.png")],
    "KSampler": [(0, 42), (1, "fixed"), (2, 4)],
    "ImageScaleToMaxDimension": [(1, 128)],
    "EmptyQwenImageLayeredLatentImage": [(0, 128), (1, 128)],
}
WORKFLOWS = {
    "qwen_image_layered": "image_qwen_image_layered",
    "qwen_image_layered_control": "image_qwen_image_layered_control",
}


MUTED = 4  # a node's mode when the web UI mutes it


def without_muted(workflow: dict) -> dict:
    """`workflow` less its muted nodes and the links into and out of them."""
    gone = {n["id"] for n in workflow["nodes"] if n.get("mode") == MUTED}
    dropped = {link[0] for link in workflow["links"] if link[1] in gone or link[3] in gone}
    nodes = [n for n in workflow["nodes"] if n["id"] not in gone]
    for node in nodes:
        for out in node.get("outputs", []):
            if out.get("links"):
                out["links"] = [i for i in out["links"] if i not in dropped]
    return {**workflow, "nodes": nodes, "links": [link for link in workflow["links"] if link[0] not in dropped]}


def renumbered(subgraph: dict, offset: int) -> dict:
    """`subgraph` with its link ids moved past the top level's: the layered template reuses ids inside and out
    (the unpacking keys both by id)."""
    for link in subgraph["links"]:
        link["id"] += offset
    for node in subgraph["nodes"]:
        for inp in node.get("inputs", []):
            if inp.get("link") is not None:
                inp["link"] += offset
        for out in node.get("outputs", []):
            if out.get("links"):
                out["links"] = [i + offset for i in out["links"]]
    for end in subgraph.get("inputs", []) + subgraph.get("outputs", []):
        end["linkIds"] = [i + offset for i in end.get("linkIds", [])]
    return subgraph


def tiny_template(template: str) -> dict:
    from scripts.qwen_image_edit_workflow import unpacked
    from scripts.templates_coverage import templates_dir

    workflow = without_muted(json.loads((templates_dir() / f"{template}.json").read_text()))
    used = {n["type"] for n in workflow["nodes"]}
    offset = max(link[0] for link in workflow["links"])
    subgraphs = [
        renumbered(sg, offset) for sg in workflow.get("definitions", {}).get("subgraphs", []) if sg["id"] in used
    ]
    workflow["definitions"] = {**workflow.get("definitions", {}), "subgraphs": subgraphs}
    for node in workflow["nodes"] + [n for sg in subgraphs for n in sg["nodes"]]:
        for index, value in SUBSTITUTE.get(node["type"], []):
            node["widgets_values"][index] = value
    return unpacked(workflow)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    registry = workspace_registry(sys.argv[1])
    for name, template in WORKFLOWS.items():
        write_workflow(name, tiny_template(template), registry)


if __name__ == "__main__":
    main()
