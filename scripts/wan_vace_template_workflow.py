"""Write workflows_json/wan21_vace_v2v{.ui,}.json from the web UI's "Wan VACE video to video" template
(video_wan_vace_14B_v2v in the installed comfyui-workflow-templates-json), with the tiny demo files in place of
the downloads:

    python scripts/wan_vace_template_workflow.py

It is the most used VACE template that runs here (video_wan_vace_inpainting, used more, needs SAM3_Detect). The
template is flat; its bypassed nodes (the 1.3B group, the Canny preprocessor between the video and the control
input, SaveAnimatedWEBP, PreviewImage) are dropped by ui_to_api as the web UI drops them, so the control video
is the loaded clip's frames. Changed from the template: the file names (wan-tiny's VACE model and its tiny LoRA,
umt5 and Wan 2.1 VAE), 64x64 pixels and 5 frames, seed 42 fixed, the control video the workspace's example.mp4
and the reference image its example.png."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))
from wan_fun_template_workflow import tiny

TEMPLATE = "video_wan_vace_14B_v2v"
OUT = REPO / "workflows_json" / "wan21_vace_v2v"
# node id -> its widgets_values in our copy
WIDGETS = {
    106: ["wan2.1_vace_1.3B_tiny.safetensors", "default"],
    105: ["wan_2.1_vae_tiny.safetensors"],
    110: ["umt5_xxl_tiny.safetensors", "wan", "default"],
    107: ["wan2.1_causvid_t2v_lora_rank32_tiny.safetensors", 0.30000000000000004, 1],
    49: [64, 64, 5, 1, 1],
    3: [42, "fixed", 4, 1, "uni_pc", "simple", 1],
    145: ["example.mp4", "image"],
    134: ["example.png", "image"],
}


def main() -> None:
    from comfy_bridge import compat
    from comfy_bridge.formats import ui_to_api
    from comfy_bridge.registry import NodeRegistry

    compat.install()
    import nodes

    registry = NodeRegistry()
    registry.add_builtin(nodes.NODE_CLASS_MAPPINGS)
    ui = tiny(TEMPLATE, WIDGETS)
    api = ui_to_api(ui, registry)
    OUT.with_suffix(".ui.json").write_text(json.dumps(ui, indent=2, ensure_ascii=False) + "\n")
    OUT.with_suffix(".json").write_text(json.dumps(api, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
