"""Write workflows_json/wan22_fun_control_5b{.ui,}.json and wan22_fun_inpaint_5b{.ui,}.json: the web UI's "Wan 2.2 5B
Fun Control" and "Wan 2.2 5B Fun Inpaint" templates (video_wan2_2_5B_fun_control, video_wan2_2_5B_fun_inpaint of the
installed comfyui-workflow-templates-json package; flat graphs) with the tiny demo files in place of the downloads
(wan-tiny's Fun Control / InP 5B model, umt5 and Wan 2.2 VAE), 64x64, 9 frames, seed 42 fixed and 3 uni_pc steps.
Control: LoadVideo reads the workspace's example.mp4 as the control video, LoadImage its example.png as the reference
image (the template's bypassed Canny and PreviewImage are dropped by the converter as the web UI drops them);
inpaint: example.png is the start and the end image. The API format is our UI converter's output.

    python scripts/wan22_fun5b_workflow.py
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TEMPLATES = {"control": "video_wan2_2_5B_fun_control", "inpaint": "video_wan2_2_5B_fun_inpaint"}
OUT = {name: REPO / "workflows_json" / f"wan22_fun_{name}_5b" for name in TEMPLATES}
COMMON = {
    "CLIPLoader": [(0, "umt5_xxl_tiny.safetensors")],
    "VAELoader": [(0, "wan2.2_vae_tiny.safetensors")],
    "KSampler": [(0, 42), (1, "fixed"), (2, 3)],
    "LoadImage": [(0, "example.png")],
}
SUBSTITUTE = {
    "control": {
        **COMMON,
        "UNETLoader": [(0, "wan2.2_fun_control_5B_tiny.safetensors")],
        "Wan22FunControlToVideo": [(0, 64), (1, 64), (2, 9)],
        "LoadVideo": [(0, "example.mp4")],
    },
    "inpaint": {
        **COMMON,
        "UNETLoader": [(0, "wan2.2_fun_inpaint_5B_tiny.safetensors")],
        "WanFunInpaintToVideo": [(0, 64), (1, 64), (2, 9)],
    },
}


def tiny_template(name: str) -> dict:
    from scripts.workflow_files import tiny_template_ui

    return tiny_template_ui(TEMPLATES[name], SUBSTITUTE[name])


def main() -> None:
    from scripts.anima_lllite_workflow import builtin_registry
    from scripts.workflow_files import write_workflow

    for name, out in OUT.items():
        write_workflow(out.name, tiny_template(name), builtin_registry())


if __name__ == "__main__":
    main()
