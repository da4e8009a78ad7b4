"""Write workflows_json/hidream_i1_dev.ui.json / .json and hidream_e1_1.ui.json / .json: the web UI's HiDream I1 Dev
text-to-image template and its HiDream E1.1 image-edit template (hidream_i1_dev, hidream_e1_1 of the installed
comfyui-workflow-templates-json package) with their own node graphs, hidream-tiny's files in place of the downloads
(the transformer, CLIP-L, CLIP-G, T5-XXL and Llama 3.1 files, Flux's tiny VAE), a fixed seed, 2 steps, tiny sizes
(I1: a 64x64 latent; E1.1: the example image scaled to 0.01 megapixels) and the transformer's weights in their own
dtype (E1.1 ships fp8_e4m3fn_fast, which is not implemented here). The API format is our UI
converter's output.

    python scripts/hidream_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEXT_ENCODERS = {
    "clip_l_hidream": "hidream_tiny_clip_l.safetensors",
    "clip_g_hidream": "hidream_tiny_clip_g.safetensors",
    "t5xxl": "hidream_tiny_t5xxl.safetensors",
    "llama_3.1_8b_instruct": "llama_3.1_8b_instruct_tiny.safetensors",
}
SUBSTITUTE = {
    # weight_dtype default: UNETLoader's fp8 weight storage (E1.1's fp8_e4m3fn_fast) is not implemented here, and
    # ComfyUI's rounding of the weights to fp8 would make its image another one
    "UNETLoader": [(0, "hidream_i1_tiny.safetensors"), (1, "default")],
    "VAELoader": [(0, "flux-tiny-ae.safetensors")],
    "EmptySD3LatentImage": [(0, 64), (1, 64)],
    "KSampler": [(0, 42), (1, "fixed"), (2, 2)],
    "RandomNoise": [(0, 42), (1, "fixed")],
    "BasicScheduler": [(1, 2)],
    "LoadImage": [(0, "example.png")],
    "ImageScaleToTotalPixels": [(1, 0.01)],
}
TEMPLATES = {"hidream_i1_dev": "hidream_i1_dev", "hidream_e1_1": "hidream_e1_1"}


def tiny_template(template: str) -> dict:
    from scripts.workflow_files import tiny_template_ui

    ui = tiny_template_ui(template, SUBSTITUTE)
    for node in ui["nodes"]:
        if node["type"] == "QuadrupleCLIPLoader":  # each file by its family, in the template's order
            node["widgets_values"] = [
                next(tiny for prefix, tiny in TEXT_ENCODERS.items() if name.startswith(prefix))
                for name in node["widgets_values"]
            ]
    return ui


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    registry = workspace_registry(sys.argv[1])
    for name, template in TEMPLATES.items():
        write_workflow(name, tiny_template(template), registry)


if __name__ == "__main__":
    main()
