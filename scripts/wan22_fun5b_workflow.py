"""Write workflows_json/wan22_fun_control_5b.json: the web UI's "Wan 2.2 5B Fun Control" template
(video_wan2_2_5B_fun_control of the installed comfyui-workflow-templates-json package) in API format, from its own
graph as scripts/templates_render.py converts it (its bypassed Canny and PreviewImage dropped as the web UI drops
them; wan-tiny's Fun Control 5B model, umt5 and Wan 2.2 VAE substituted; 64x64, 9 frames), with a fixed seed and 3
uni_pc steps. LoadVideo reads the workspace's example.mp4 as the control video, LoadImage its example.png as the
reference image.

    python scripts/wan22_fun5b_workflow.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TEMPLATE = "video_wan2_2_5B_fun_control"
OUT = REPO / "workflows_json" / "wan22_fun_control_5b.json"
STEPS, SEED = 3, 42


def workflow() -> dict:
    """The API prompt (deterministic: the builtin registry, no workspace)."""
    from comfy_bridge.registry import build_registry
    from scripts.templates_coverage import templates_dir
    from scripts.templates_render import tiny_prompt

    template = json.loads((templates_dir() / f"{TEMPLATE}.json").read_text())
    prompt, tripwires = tiny_prompt(template, build_registry(None, load_custom_nodes=False))
    assert not tripwires, tripwires
    for node in prompt.values():
        if node["class_type"] == "KSampler":
            node["inputs"].update(seed=SEED, steps=STEPS)
    return prompt


def main() -> None:
    OUT.write_text(json.dumps(workflow(), indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
