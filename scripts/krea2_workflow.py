"""Write workflows_json/krea2_turbo_t2i.ui.json and .json: the web UI's "Krea 2 Turbo" text-to-image template
(image_krea2_turbo_t2i of the installed comfyui-workflow-templates-json package) with its own node graph, its
subgraph unpacked in place as scripts/qwen_image21_workflow.py does it (the prompt from a PrimitiveStringMultiline
where the subgraph input fed a socket, PreviewAny's outgoing link started at its source, ResolutionSelector's
`minimum` widget filled), the tiny demo files substituted for the downloads (krea2-tiny's transformer and
Qwen3-VL, qwen-image-tiny's VAE), a fixed seed and 0.1 megapixels. The prompt enhancer runs as shipped
(TextGenerate on the tiny Qwen3-VL, 512 tokens at most); the style LoRA stays off as shipped, so its
LoraLoaderModelOnly is only validated: a demo LoRA's name stands in for krea2_darkbrush. The API format is our UI
converter's output.

    python scripts/krea2_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "image_krea2_turbo_t2i"
NAME = "krea2_turbo_t2i"
SUBSTITUTE = {
    "UNETLoader": [(0, "krea2_turbo_tiny.safetensors")],
    "CLIPLoader": [(0, "qwen3vl_4b_tiny.safetensors")],
    "VAELoader": [(0, "qwen_image_vae_tiny.safetensors")],
    "LoraLoaderModelOnly": [(0, "qwen_image_edit_tiny_lightning.safetensors")],
    "KSampler": [(0, 42), (1, "fixed")],
    "ResolutionSelector": [(1, 0.1), (3, 256)],
}
PROMPT_INPUT = "value"


def tiny_template() -> dict:
    from scripts.qwen_image21_workflow import _bypass_preview_outputs, _prompt_node
    from scripts.qwen_image_edit_workflow import unpacked
    from scripts.templates_coverage import templates_dir

    workflow = json.loads((templates_dir() / f"{TEMPLATE}.json").read_text())
    (sg,) = workflow["definitions"]["subgraphs"]
    for node in workflow["nodes"] + sg["nodes"]:
        for index, value in SUBSTITUTE.get(node["type"], []):
            values = node["widgets_values"]
            values[index : index + 1] = [value]  # index == len: a widget the saved template predates
    (outer,) = [n for n in workflow["nodes"] if n["type"] == sg["id"]]
    prompt = outer["widgets_values"][[i["name"] for i in sg["inputs"]].index(PROMPT_INPUT)]
    flat = unpacked(workflow)
    # _prompt_node finds the prompt's subgraph input by the Qwen template's name for it
    _prompt_node(
        flat,
        {**sg, "inputs": [{**i, "name": "prompt"} if i["name"] == PROMPT_INPUT else i for i in sg["inputs"]]},
        prompt,
    )
    _bypass_preview_outputs(flat)
    return flat


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
