"""Write workflows_json/zimage_lora_switch.ui.json and .json: the web UI's "Switch node" template (basic_switch_node
of the installed comfyui-workflow-templates-json package: Z-Image-Turbo whose model and prompt a boolean switches
between the plain model and the model with a style LoRA, beside a string-switch example) with its own node graph (its
subgraph unpacked as the web UI queues it), the tiny demo files substituted for the downloads (z-image-turbo-tiny's
transformer, Qwen3 text encoder and autoencoder; for the pixel-art LoRA, the tiny LoRA in ai-toolkit's layout that
nodes/models/zimage_demo.py writes), a 128 x 128 latent, a fixed seed and 2 steps; the switch stays on, as shipped.
The API format is our UI converter's output.

    python scripts/zimage_lora_switch_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "basic_switch_node"
NAME = "zimage_lora_switch"
SUBSTITUTE = {
    "UNETLoader": [(0, "z-image-turbo-tiny.safetensors")],
    "CLIPLoader": [(0, "qwen_3_4b-tiny.safetensors")],
    "VAELoader": [(0, "z-image-turbo-tiny-ae.safetensors")],
    "LoraLoaderModelOnly": [(0, "z_image_turbo_lora_tiny.safetensors")],
    "EmptySD3LatentImage": [(0, 128), (1, 128)],
    "KSampler": [(0, 42), (1, "fixed"), (2, 2)],
}


def tiny_template() -> dict:
    from scripts.templates_render import flat_workflow
    from scripts.workflow_files import tiny_template_ui

    return tiny_template_ui(TEMPLATE, SUBSTITUTE, flat_workflow)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
