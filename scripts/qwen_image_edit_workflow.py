"""Write workflows_json/qwen_image_edit_2509.ui.json and .json (and likewise qwen_image_edit_2511): the web UI's
"Qwen-Image-Edit 2509" template (image_qwen_image_edit_2509 of the installed comfyui-workflow-templates-json
package; image_qwen_image_edit_2511 for 2511) with its own node graph (unpacked in place, as the web UI's "unpack subgraph" does, since the server only ever sees flat graphs), the
tiny demo files substituted for the downloads, the example input image for its picture, and a fixed seed (the
template draws a new one per run). The 2511 template's switch is set to its own 4-step Lightning LoRA path (it
ships set to 40 steps at cfg 3, too slow for tests on a CPU). The API format is our UI converter's output.

    python scripts/qwen_image_edit_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
# Widget values replaced, by node class: (widget index, value).
SUBSTITUTE = {
    "UNETLoader": [(0, "qwen_image_tiny.safetensors")],
    "CLIPLoader": [(0, "qwen_2.5_vl_7b_edit_tiny.safetensors")],
    "VAELoader": [(0, "qwen_image_vae_tiny.safetensors")],
    "LoraLoaderModelOnly": [(0, "qwen_image_edit_tiny_lightning.safetensors")],
    "LoadImage": [(0, "example.png")],
    "KSampler": [(0, 42), (1, "fixed")],
}
# Output name: (template, its own substitutions).
WORKFLOWS = {
    "qwen_image_edit_2509": ("image_qwen_image_edit_2509", {}),
    "qwen_image_edit_2511": (
        "image_qwen_image_edit_2511",
        {"UNETLoader": [(0, "qwen_image_edit_2511_tiny.safetensors")], "PrimitiveBoolean": [(0, True)]},
    ),
}


def tiny_template(template: str, substitute: dict) -> dict:
    from scripts.templates_coverage import templates_dir

    workflow = json.loads((templates_dir() / f"{template}.json").read_text())
    nodes = list(workflow["nodes"])
    for sg in workflow.get("definitions", {}).get("subgraphs", []):
        nodes += sg["nodes"]
    for node in nodes:
        for index, value in {**SUBSTITUTE, **substitute}.get(node["type"], []):
            node["widgets_values"][index] = value
    return unpacked(workflow)


SUBGRAPH_IN, SUBGRAPH_OUT = -10, -20  # the ids a subgraph's links use for its input and output ends


def unpacked(workflow: dict) -> dict:
    """`workflow` with each subgraph instance replaced by its inner nodes and links (one level deep). An inner
    input wired to a subgraph input that is a promoted widget keeps its own widget value."""
    subgraphs = {sg["id"]: sg for sg in workflow.get("definitions", {}).get("subgraphs", [])}
    links = {l[0]: list(l) for l in workflow["links"]}
    nodes, fed = [], set()
    for node in workflow["nodes"]:
        sg = subgraphs.get(node["type"])
        if sg is None:
            nodes.append(node)
            continue
        outer_in = {i["name"]: i.get("link") for i in node.get("inputs", [])}
        inner = {n["id"]: n for n in sg["nodes"]}
        nodes += sg["nodes"]
        for l in sg["links"]:
            lid, src, slot, dst, dslot = l["id"], l["origin_id"], l["origin_slot"], l["target_id"], l["target_slot"]
            if src == SUBGRAPH_IN:
                feed = outer_in.get(sg["inputs"][slot]["name"])
                if feed is None:  # a promoted widget (or an unwired optional input): no link
                    inner[dst]["inputs"][dslot]["link"] = None
                    continue
                src, slot = links[feed][1], links[feed][2]
                _swap_link(nodes, feed, src, slot, lid)
                fed.add(feed)
            if dst == SUBGRAPH_OUT:
                for out_id in node["outputs"][dslot]["links"] or []:
                    _, _, _, dst2, dslot2, _ = links.pop(out_id)
                    links[out_id] = [out_id, src, slot, dst2, dslot2, l["type"]]
                    _add_output_link(inner[src], slot, lid, out_id)
                continue
            links[lid] = [lid, src, slot, dst, dslot, l["type"]]
    for feed in fed:  # the outer links into the subgraph are replaced by the inner ones
        del links[feed]
    workflow = {**workflow, "nodes": nodes, "links": sorted(links.values())}
    workflow["definitions"] = {**workflow.get("definitions", {}), "subgraphs": []}
    return workflow


def _swap_link(nodes: list[dict], old: int, src: int, slot: int, new: int) -> None:
    """The outer node that fed the subgraph now feeds the inner node: its output lists the inner link (in place
    of the outer one, or beside it when one subgraph input feeds several inner inputs)."""
    for n in nodes:
        if n["id"] == src:
            links = n["outputs"][slot]["links"]
            if old in links:
                links[links.index(old)] = new
            else:
                links.append(new)


def _add_output_link(node: dict, slot: int, old: int, new: int) -> None:
    # a subgraph output feeding several outer inputs: the inner link is replaced by the first, the rest join it
    links = node["outputs"][slot]["links"]
    if old in links:
        links[links.index(old)] = new
    else:
        links.append(new)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    registry = workspace_registry(sys.argv[1])
    for name, (template, substitute) in WORKFLOWS.items():
        write_workflow(name, tiny_template(template, substitute), registry)


if __name__ == "__main__":
    main()
