"""Write workflows_json/qwen_image21_t2i.ui.json and .json: the web UI's "Qwen Image 2.1" text-to-image template
(image_qwen_image_2_1_t2i of the installed comfyui-workflow-templates-json package) with its own node graph, its
subgraph unpacked in place (as the web UI's "unpack subgraph" does; the server only ever sees flat graphs), the
tiny demo files substituted for the downloads, a fixed seed and 0.1 megapixels (the template asks for 1; 25
steps at that size are too slow for tests on a CPU). The prompt enhancer stays off as shipped (its ComfySwitchNode
passes the prompt through; the lazy TextGenerate branch never runs), so its Qwen 3.5 file is only validated: the
tiny Qwen3-VL file's name stands in for it. The subgraph's prompt widget feeds a switch input that has no widget
of its own, so unpacking puts the template's prompt into a PrimitiveStringMultiline node wired where the subgraph
input was. Two things of today's frontend and ComfyUI that this server's nodes lack are done here: the
ResolutionSelector, saved before its `minimum` widget existed, gets that widget's default (the web UI fills it on
load), and the template's PreviewAny passes the shown prompt on through a STRING output (newer than ComfyUI 0.10.0,
whose PreviewAny has no output and whose interface ours declares), so its outgoing link starts at PreviewAny's
own source instead (the same string) and PreviewAny stays as the preview. The API format is our UI converter's
output.

    python scripts/qwen_image21_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "image_qwen_image_2_1_t2i"
NAME = "qwen_image21_t2i"
SUBSTITUTE = {
    "UNETLoader": [(0, "qwen_image_2.1_tiny.safetensors")],
    "CLIPLoader": [(0, "qwen3vl_8b_tiny.safetensors")],
    "VAELoader": [(0, "qwen_image_2.1_vae_tiny.safetensors")],
    "KSampler": [(0, 42), (1, "fixed")],
    "ResolutionSelector": [(1, 0.1), (3, 256)],
}
PROMPT_INPUT = "prompt"


def tiny_template() -> dict:
    from scripts.qwen_image_edit_workflow import unpacked
    from scripts.templates_coverage import templates_dir

    workflow = json.loads((templates_dir() / f"{TEMPLATE}.json").read_text())
    (sg,) = workflow["definitions"]["subgraphs"]
    for node in workflow["nodes"] + sg["nodes"]:
        for index, value in SUBSTITUTE.get(node["type"], []):
            values = node["widgets_values"]
            values[index : index + 1] = [value]  # index == len: a widget the saved template predates
    (outer,) = [n for n in workflow["nodes"] if n["type"] == sg["id"]]
    prompt = outer["widgets_values"][[i["name"] for i in sg["inputs"]].index(PROMPT_INPUT)]
    flat = unpacked(workflow)
    _prompt_node(flat, sg, prompt)
    _bypass_preview_outputs(flat)
    return flat


def _bypass_preview_outputs(flat: dict) -> None:
    """Links out of a PreviewAny start at what feeds it (the string it shows) instead."""
    links = {l[0]: l for l in flat["links"]}
    nodes = {n["id"]: n for n in flat["nodes"]}
    for node in flat["nodes"]:
        if node["type"] != "PreviewAny" or not node["outputs"] or not node["outputs"][0].get("links"):
            continue
        feed = links[node["inputs"][0]["link"]]
        for lid in node["outputs"][0]["links"]:
            links[lid][1], links[lid][2] = feed[1], feed[2]
            nodes[feed[1]]["outputs"][feed[2]]["links"].append(lid)
        node["outputs"] = []


def _prompt_node(flat: dict, sg: dict, prompt: str) -> None:
    """Feed the template's prompt, from a new PrimitiveStringMultiline, to every inner input that the subgraph's
    prompt input fed and that has no widget to hold it (unpacking left those unlinked)."""
    slot = [i["name"] for i in sg["inputs"]].index(PROMPT_INPUT)
    nodes = {n["id"]: n for n in flat["nodes"]}
    node_id = max(nodes) + 1
    next_link = max(l[0] for l in flat["links"]) + 1
    out_links = []
    for l in sg["links"]:
        if l["origin_id"] != -10 or l["origin_slot"] != slot:
            continue
        target = nodes[l["target_id"]]["inputs"][l["target_slot"]]
        if "widget" in target:
            continue  # a widget keeps the value (the lazy TextGenerate's prompt)
        target["link"] = next_link
        flat["links"].append([next_link, node_id, 0, l["target_id"], l["target_slot"], "STRING"])
        out_links.append(next_link)
        next_link += 1
    flat["nodes"].append(
        {
            "id": node_id,
            "type": "PrimitiveStringMultiline",
            "pos": [0, 0],
            "size": [400, 200],
            "flags": {},
            "order": 0,
            "mode": 0,
            "inputs": [],
            "outputs": [{"name": "STRING", "type": "STRING", "links": out_links}],
            "properties": {"Node name for S&R": "PrimitiveStringMultiline"},
            "widgets_values": [prompt],
        }
    )
    flat["last_node_id"] = max(flat.get("last_node_id", 0), node_id)
    flat["last_link_id"] = max(flat.get("last_link_id", 0), next_link - 1)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
