"""Write workflows_json/netayume_lumina_t2i.ui.json and .json: the web UI's "NetaYume Lumina" text-to-image template
(image_netayume_lumina_t2i of the installed comfyui-workflow-templates-json package) with its own node graph, its
subgraphs (two levels) unpacked in place (scripts/qwen_image_edit_workflow.py's `unpacked`), the tiny all-in-one checkpoint
netayume-lumina-tiny (nodes/models/lumina2_demo.py) in place of NetaYumev35_pretrained_all_in_one, a fixed seed,
3 steps and a 64x48 image. The API format is our UI converter's output.

    python scripts/lumina2_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "image_netayume_lumina_t2i"
NAME = "netayume_lumina_t2i"
SUBSTITUTE = {
    "CheckpointLoaderSimple": [(0, "netayume-lumina-tiny.safetensors")],
    "KSampler": [(0, 42), (1, "fixed"), (2, 3)],
    "EmptySD3LatentImage": [(0, 64), (1, 48)],
}


def tiny_template() -> dict:
    from scripts.qwen_image_edit_workflow import unpacked
    from scripts.workflow_files import substituted, template_ui

    template = template_ui(TEMPLATE)
    flat = unpacked(template)
    # The negative prompt is a subgraph inside the main one: unpack a second level with the same definitions.
    flat = unpacked({**flat, "definitions": template["definitions"]})
    return substituted(flat, SUBSTITUTE)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
