"""Write workflows_json/wan22_i2v{.ui,}.json from the web UI's "Wan 2.2 14B image to video" template
(video_wan2_2_14B_i2v in the installed comfyui-workflow-templates-json) and workflows_json/wan22_5b{.ui,}.json
from its "Wan 2.2 5B video generation" template (video_wan2_2_5B_ti2v), with the tiny demo files and a tiny
clip in place of the downloads:

    python scripts/wan_template_workflow.py

The template keeps its graph in one subgraph ("Image to Video (Wan2.2)"); the UI file here is that graph
flattened as the web UI queues it (inner nodes keep their ids; the subgraph's widget inputs become
PrimitiveNodes feeding the inner widgets), and the API file is what ui_to_api makes of it. Changed from the
template: the model, LoRA, text encoder and VAE file names (the tiny demo files; the LoRAs stay switched off as
the template ships them), 64x64 pixels, a 0.25 s clip at 16 fps (5 frames), 6 steps (3 per expert) and the
input image (the workspace's example.png). The 5B template is flat already (its LoadImage is bypassed, so it
runs as text-to-video); changed there: the file names, 64x64 pixels, 5 frames, seed 42 fixed, 4 steps."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "video_wan2_2_14B_i2v"
OUT = REPO / "workflows_json" / "wan22_i2v"
# The subgraph node's widget inputs (by name) -> our value.
SUBSTITUTE = {
    "width": 64,
    "height": 64,
    "value_1": 0.25,
    "noise_seed": 42,
    "unet_name": "wan2.2_i2v_high_noise_14B_tiny.safetensors",
    "unet_name_1": "wan2.2_i2v_low_noise_14B_tiny.safetensors",
    "lora_name": "wan2.2_i2v_lightx2v_4steps_lora_tiny_high_noise.safetensors",
    "lora_name_1": "wan2.2_i2v_lightx2v_4steps_lora_tiny_low_noise.safetensors",
    "clip_name": "umt5_xxl_tiny.safetensors",
    "vae_name": "wan_2.1_vae_tiny.safetensors",
}
# Inner widget values changed: (node id, position in widgets_values) -> value.
INNER = {(128, 0): 6, (127, 0): 3}  # total steps and the step where the low-noise expert takes over
IMAGE = "example.png"
OUT_5B = REPO / "workflows_json" / "wan22_5b"
TEMPLATE_5B = "video_wan2_2_5B_ti2v"
# node id -> its widgets_values in our copy of the 5B template
WIDGETS_5B = {
    37: ["wan2.2_ti2v_5B_tiny.safetensors", "default"],
    38: ["umt5_xxl_tiny.safetensors", "wan", "default"],
    39: ["wan2.2_vae_tiny.safetensors"],
    55: [64, 64, 5, 1],
    3: [42, "fixed", 4, 5, "uni_pc", "simple", 1],
}


def template(name: str = TEMPLATE) -> dict:
    import comfyui_workflow_templates_json

    folder = Path(comfyui_workflow_templates_json.__file__).parent / "templates"
    return json.loads((folder / f"{name}.json").read_text())


def tiny_template() -> dict:
    """The 14B image-to-video template as the web UI holds it (its subgraph kept) with our substitutions."""
    wf = template()
    (sg,) = wf["definitions"]["subgraphs"]
    (outer,) = [n for n in wf["nodes"] if n["type"] == sg["id"]]
    names = [i["name"] for i in sg["inputs"] if i["type"] != "IMAGE"]
    outer["widgets_values"] = [SUBSTITUTE.get(n, v) for n, v in zip(names, outer["widgets_values"])]
    for node in sg["nodes"]:
        for (node_id, pos), value in INNER.items():
            if node["id"] == node_id:
                node["widgets_values"][pos] = value
    for node in wf["nodes"]:
        if node["type"] == "LoadImage":
            node["widgets_values"] = [IMAGE, "image"]
    return wf


def tiny_5b() -> dict:
    wf = template(TEMPLATE_5B)
    for node in wf["nodes"]:
        if node["id"] in WIDGETS_5B:
            node["widgets_values"] = WIDGETS_5B[node["id"]]
    return wf


def flatten(wf: dict) -> dict:
    """The template's one subgraph node replaced by the subgraph's nodes, as one flat UI workflow."""
    (sg,) = wf["definitions"]["subgraphs"]
    (outer,) = [n for n in wf["nodes"] if n["type"] == sg["id"]]
    outer_links = {link[0]: link for link in wf["links"]}
    widget_names = [i["name"] for i in outer["inputs"] if i.get("widget")]
    # the subgraph node's widgets_values follow the subgraph's inputs that are widgets, in order
    sg_widgets = [i["name"] for i in sg["inputs"] if i["type"] != "IMAGE"]
    values = dict(zip(sg_widgets, outer["widgets_values"]))
    assert set(widget_names) <= set(values)
    values.update(SUBSTITUTE)
    nodes = [n for n in wf["nodes"] if n["id"] != outer["id"]]
    for n in nodes:
        if n["type"] == "LoadImage":
            n["widgets_values"] = [IMAGE, "image"]
    links = [link for link in wf["links"] if outer["id"] not in (link[1], link[3])]
    next_id = max(n["id"] for n in wf["nodes"] + sg["nodes"]) + 1
    inner = {n["id"]: json.loads(json.dumps(n)) for n in sg["nodes"]}
    for (node_id, pos), value in INNER.items():
        inner[node_id]["widgets_values"][pos] = value
    nodes += list(inner.values())
    sg_inputs = {link_id: i for i in sg["inputs"] for link_id in i["linkIds"]}
    outer_in = {i["name"]: i for i in outer["inputs"]}
    primitives: dict[str, int] = {}
    for link in sg["links"]:
        lid, origin, slot, target, tslot, kind = (
            link[k] for k in ("id", "origin_id", "origin_slot", "target_id", "target_slot", "type")
        )
        if origin == -10:  # from the subgraph's inputs: the outer link, or a PrimitiveNode with the widget value
            name = sg_inputs[lid]["name"]
            outer_link = outer_in.get(name, {}).get("link")
            if outer_link is not None:
                o = outer_links[outer_link]
                links.append([lid, o[1], o[2], target, tslot, kind])
                continue
            if name not in primitives:
                primitives[name] = next_id
                nodes.append(
                    {
                        "id": next_id,
                        "type": "PrimitiveNode",
                        "mode": 0,
                        "inputs": [],
                        "outputs": [{"name": "connect to widget input", "type": kind, "links": []}],
                        "widgets_values": [values[name]],
                        "properties": {},
                    }
                )
                next_id += 1
            links.append([lid, primitives[name], 0, target, tslot, kind])
        elif target == -20:  # to the subgraph's output: to whatever the outer output fed, under a new link id
            for o in [o for o in outer_links.values() if o[1] == outer["id"]]:
                fresh = max(link["id"] for link in sg["links"]) + 1 + o[0]
                links.append([fresh, origin, slot, o[3], o[4], o[5]])
                consumer = next(n for n in nodes if n["id"] == o[3])
                consumer["inputs"][o[4]]["link"] = fresh
        else:
            links.append([lid, origin, slot, target, tslot, kind])
    for n in nodes:
        if n["type"] == "PrimitiveNode":
            n["outputs"][0]["links"] = [link[0] for link in links if link[1] == n["id"]]
    flat = {k: v for k, v in wf.items() if k not in ("definitions", "nodes", "links")}
    flat.update(nodes=nodes, links=links, last_node_id=next_id - 1, last_link_id=max(link[0] for link in links))
    return flat


def main() -> None:
    from comfy_bridge import compat
    from comfy_bridge.formats import ui_to_api
    from comfy_bridge.registry import NodeRegistry

    compat.install()
    import nodes

    registry = NodeRegistry()
    registry.add_builtin(nodes.NODE_CLASS_MAPPINGS)
    for out, ui in ((OUT, flatten(template())), (OUT_5B, tiny_5b())):
        api = ui_to_api(ui, registry)
        out.with_suffix(".ui.json").write_text(json.dumps(ui, indent=2, ensure_ascii=False) + "\n")
        out.with_suffix(".json").write_text(json.dumps(api, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
