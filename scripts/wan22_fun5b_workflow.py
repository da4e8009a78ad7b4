"""Write workflows_json/wan22_fun_control_5b.json and wan22_fun_inpaint_5b.json: the web UI's "Wan 2.2 5B Fun
Control" and "Wan 2.2 5B Fun Inpaint" templates (video_wan2_2_5B_fun_control, video_wan2_2_5B_fun_inpaint of the
installed comfyui-workflow-templates-json package) in API format, from their own graphs as
scripts/templates_render.py converts them (the control template's bypassed Canny and PreviewImage dropped as the web
UI drops them; wan-tiny's Fun Control / InP 5B model, umt5 and Wan 2.2 VAE substituted; 64x64, 9 frames), with a
fixed seed and 3 uni_pc steps. Control: LoadVideo reads the workspace's example.mp4 as the control video, LoadImage
its example.png as the reference image; inpaint: example.png is the start and the end image.

    python scripts/wan22_fun5b_workflow.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TEMPLATES = {"control": "video_wan2_2_5B_fun_control", "inpaint": "video_wan2_2_5B_fun_inpaint"}
OUT = {name: REPO / "workflows_json" / f"wan22_fun_{name}_5b.json" for name in TEMPLATES}
STEPS, SEED = 3, 42


def workflow(name: str = "control") -> dict:
    """The API prompt of TEMPLATES[name] (deterministic: the builtin registry, no workspace)."""
    from comfy_bridge.registry import build_registry
    from scripts.templates_coverage import templates_dir
    from scripts.templates_render import tiny_prompt

    template = json.loads((templates_dir() / f"{TEMPLATES[name]}.json").read_text())
    prompt, tripwires = tiny_prompt(template, build_registry(None, load_custom_nodes=False))
    assert not tripwires, tripwires
    for node in prompt.values():
        if node["class_type"] == "KSampler":
            node["inputs"].update(seed=SEED, steps=STEPS)
    return prompt


def main() -> None:
    for name, out in OUT.items():
        out.write_text(json.dumps(workflow(name), indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
