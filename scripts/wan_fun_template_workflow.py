"""Write workflows_json/wan22_fun_inpaint{.ui,}.json from the web UI's "Wan 2.2 14B Fun Inpaint" template
(video_wan2_2_14B_fun_inpaint in the installed comfyui-workflow-templates-json) and
workflows_json/wan21_fun_camera{.ui,}.json from its "Wan 2.1 Fun Camera v1.1 1.3B" template
(video_wan2.1_fun_camera_v1.1_1.3B), with the tiny demo files in place of the downloads:

    python scripts/wan_fun_template_workflow.py

The template is flat (its second, bypassed group of nodes is dropped by ui_to_api as the web UI drops it).
Changed from the template: the file names (wan-tiny's Fun InP model for both experts, the tiny 4-step LoRAs,
umt5 and Wan 2.1 VAE), 64x64 pixels, 5 frames, 4 steps (2 per expert, as shipped), seed 42 fixed, and both
images the workspace's example.png. The camera template: the file names (wan-tiny's Fun Camera model, the demo
CLIP vision model), Zoom In at 64x64 and 5 frames, 4 uni_pc steps, seed 42, example.png as start image."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))
from wan_template_workflow import template

TEMPLATE = "video_wan2_2_14B_fun_inpaint"
OUT = REPO / "workflows_json" / "wan22_fun_inpaint"
FUN_INP = "wan2.1_fun_inp_1.3B_tiny.safetensors"
# node id -> its widgets_values in our copy (the active group's nodes)
WIDGETS = {
    90: ["umt5_xxl_tiny.safetensors", "wan", "default"],
    92: ["wan_2.1_vae_tiny.safetensors"],
    101: [FUN_INP, "default"],
    102: [FUN_INP, "default"],
    116: ["wan2.2_i2v_lightx2v_4steps_lora_tiny_high_noise.safetensors", 1],
    117: ["wan2.2_i2v_lightx2v_4steps_lora_tiny_low_noise.safetensors", 1],
    111: [64, 64, 5, 1],
    110: ["example.png", "image"],
    112: ["example.png", "image"],
    96: ["enable", 42, "fixed", 4, 1, "euler", "simple", 0, 2, "enable"],
}


CAMERA_TEMPLATE = "video_wan2.1_fun_camera_v1.1_1.3B"
CAMERA_OUT = REPO / "workflows_json" / "wan21_fun_camera"
CAMERA_WIDGETS = {
    49: ["clip-vision-tiny.safetensors"],
    39: ["wan_2.1_vae_tiny.safetensors"],
    38: ["umt5_xxl_tiny.safetensors", "wan", "default"],
    37: ["wan2.1_fun_camera_v1.1_1.3B_tiny.safetensors", "default"],
    52: ["example.png", "image"],
    3: [42, "fixed", 4, 6, "uni_pc", "simple", 1],
    57: ["Zoom In", 64, 64, 5, 1, 0.5, 0.5, 0.5, 0.5],
}


def tiny(name: str = TEMPLATE, widgets: dict = WIDGETS) -> dict:
    wf = template(name)
    for node in wf["nodes"]:
        if node["id"] in widgets:
            node["widgets_values"] = widgets[node["id"]]
    return wf


def main() -> None:
    from comfy_bridge import compat
    from comfy_bridge.formats import ui_to_api
    from comfy_bridge.registry import NodeRegistry

    compat.install()
    import nodes

    registry = NodeRegistry()
    registry.add_builtin(nodes.NODE_CLASS_MAPPINGS)
    for out, ui in ((OUT, tiny()), (CAMERA_OUT, tiny(CAMERA_TEMPLATE, CAMERA_WIDGETS))):
        api = ui_to_api(ui, registry)
        out.with_suffix(".ui.json").write_text(json.dumps(ui, indent=2, ensure_ascii=False) + "\n")
        out.with_suffix(".json").write_text(json.dumps(api, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
