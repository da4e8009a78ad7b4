"""Write workflows_json/uso_reference.ui.json and .json: the web UI's USO template (flux1_dev_uso_reference_image_gen
of the installed comfyui-workflow-templates-json package: FLUX.1 dev with USO's DiT LoRA and a character reference
image through ReferenceLatent, its two style-reference subgraphs bypassed as shipped) with its own node graph (its
subgraphs unpacked as the web UI queues them), the tiny demo files substituted for the downloads (nodes/models/
uso_demo.py's flux1-dev-uso-tiny checkpoint and uso-flux1-dit-lora-v1-tiny, the tiny USO projector and SigLIP) in
the subgraph instances' promoted widgets, example.png as the reference (scaled to 128 at most), a 128 x 128 latent,
seed 42 and 2 steps. The API format is our UI converter's.

    python scripts/uso_reference_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "flux1_dev_uso_reference_image_gen"
NAME = "uso_reference"
# the instances' promoted widgets: prompt, width, height, seed, checkpoint, LoRA, projector, SigLIP
TINY_FILES = [
    "flux1-dev-uso-tiny.safetensors",
    "uso-flux1-dit-lora-v1-tiny.safetensors",
    "uso-flux1-projector-v1-tiny.safetensors",
    "sigclip-vision-tiny.safetensors",
]
SUBSTITUTE = {
    "LoadImage": [(0, "example.png")],
    "ImageScaleToMaxDimension": [(1, 128)],
    "KSampler": [(1, "fixed"), (2, 2)],
}


def tiny_template() -> dict:
    from scripts.templates_render import flat_workflow
    from scripts.workflow_files import substituted, template_ui

    ui = template_ui(TEMPLATE)
    for node in ui["nodes"]:
        values = node.get("widgets_values")
        if isinstance(values, list) and len(values) == 8 and values[4].startswith("flux1-dev"):
            node["widgets_values"] = [values[0], 128, 128, 42, *TINY_FILES]
    return substituted(flat_workflow(ui), SUBSTITUTE)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
