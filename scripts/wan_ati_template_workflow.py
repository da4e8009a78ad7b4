"""Write workflows_json/wan21_ati{.ui,}.json from the web UI's "Wan ATI" template (video_wan_ati in the installed
comfyui-workflow-templates-json), with the tiny demo files in place of the downloads:

    python scripts/wan_ati_template_workflow.py

Changed from the template: the file names (wan-tiny's Wan 2.1 image-to-video 14B model for the ATI file, umt5, the
Wan 2.1 VAE, the demo CLIP vision model), the workspace's example.png as start image, 64x48 pixels and 5 frames,
4 uni_pc steps with seed 42 fixed, and the template's one track (its 162 points drawn on the 720x480 frame) scaled
to the 64x48 frame, so that it still crosses the picture."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))
from wan_template_workflow import template

TEMPLATE = "video_wan_ati"
OUT = REPO / "workflows_json" / "wan21_ati"
WIDTH, HEIGHT, TEMPLATE_WIDTH, TEMPLATE_HEIGHT = 64, 48, 720, 480
TRACKS_NODE = 247
WIDGETS = {
    140: ["wan2.1_i2v_480p_14B_tiny.safetensors", "default"],
    38: ["umt5_xxl_tiny.safetensors", "wan", "default"],
    39: ["wan_2.1_vae_tiny.safetensors"],
    244: ["clip-vision-tiny.safetensors"],
    240: ["example.png", "image"],
    248: ["[]", WIDTH, HEIGHT, 5, 1, 220, 10],
    3: [42, "fixed", 4, 3, "uni_pc", "simple", 1],
}


def scaled_tracks(text: str) -> str:
    """The template's tracks moved from its 720x480 frame onto ours."""
    sx, sy = WIDTH / TEMPLATE_WIDTH, HEIGHT / TEMPLATE_HEIGHT
    tracks = json.loads(text)
    return json.dumps([[{"x": round(p["x"] * sx, 2), "y": round(p["y"] * sy, 2)} for p in t] for t in tracks])


def tiny() -> dict:
    wf = template(TEMPLATE)
    for node in wf["nodes"]:
        if node["id"] in WIDGETS:
            node["widgets_values"] = WIDGETS[node["id"]]
        elif node["id"] == TRACKS_NODE:
            node["widgets_values"] = [scaled_tracks(node["widgets_values"][0])]
    return wf


def main() -> None:
    from comfy_bridge import compat
    from comfy_bridge.formats import ui_to_api
    from comfy_bridge.registry import NodeRegistry

    compat.install()
    import nodes

    registry = NodeRegistry()
    registry.add_builtin(nodes.NODE_CLASS_MAPPINGS)
    ui = tiny()
    api = ui_to_api(ui, registry)
    OUT.with_suffix(".ui.json").write_text(json.dumps(ui, indent=2, ensure_ascii=False) + "\n")
    OUT.with_suffix(".json").write_text(json.dumps(api, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
