"""Write workflows_json/seedvr2_3b_upscale_image and seedvr2_7b_upscale_image (.ui.json and .json): the web UI's
SeedVR2 3B and 7B image upscale templates (utility_seedvr2_3b_int8_upscale_image / utility_seedvr2_7b_int8_upscale_image
of the installed comfyui-workflow-templates-json package) with their subgraph unpacked in place
(scripts/qwen_image_edit_workflow.py's unpacking), the tiny demo files substituted for the downloads
(diffusion_models/seedvr2_3b_tiny or seedvr2_7b_tiny, vae/seedvr2_ema_vae_fp16_tiny), the example input image, seed 42, and
the resize multiplier 1 instead of 4 (the tiny files run on a CPU in tests). Its JoinImageWithAlpha (the input's
alpha: example.png has none, so an opaque channel SeedVR2Preprocess drops again) and the ImageCompare preview are
left out: LoadImage's image goes to the resize directly. The API format is our UI converter's output.

    python scripts/seedvr2_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

WORKFLOWS = {  # name: (template, tiny transformer)
    "seedvr2_3b_upscale_image": ("utility_seedvr2_3b_int8_upscale_image", "seedvr2_3b_tiny.safetensors"),
    "seedvr2_7b_upscale_image": ("utility_seedvr2_7b_int8_upscale_image", "seedvr2_7b_tiny.safetensors"),
}
SUBSTITUTE = {
    "VAELoader": [(0, "seedvr2_ema_vae_fp16_tiny.safetensors")],
    "LoadImage": [(0, "example.png")],
    "KSampler": [(0, 42)],
    "ResizeImageMaskNode": [(1, 1)],
}
LEFT_OUT = ("JoinImageWithAlpha", "ImageCompare", "MarkdownNote")


def without_alpha_join(ui: dict) -> dict:
    """`ui` less LEFT_OUT's nodes, LoadImage's image linked straight to what the join fed."""
    kinds = {n["id"]: n["type"] for n in ui["nodes"]}
    load = next(n for n in ui["nodes"] if n["type"] == "LoadImage")
    join = next(n["id"] for n in ui["nodes"] if n["type"] == "JoinImageWithAlpha")
    links = []
    for link in ui["links"]:
        if kinds[link[1]] in LEFT_OUT[1:] or kinds[link[3]] in LEFT_OUT:
            continue
        if link[1] == join:  # the join's output now comes from LoadImage's IMAGE
            link = [link[0], load["id"], 0, *link[3:]]
        links.append(link)
    kept = {link[0] for link in links}
    nodes = [n for n in ui["nodes"] if n["type"] not in LEFT_OUT]
    for node in nodes:
        for out in node.get("outputs", []):
            out["links"] = [i for i in out.get("links") or [] if i in kept]
        for inp in node.get("inputs", []):
            if inp.get("link") is not None and inp["link"] not in kept:
                inp["link"] = None
    load["outputs"][0]["links"] = [link[0] for link in links if link[1] == load["id"] and link[2] == 0]
    return {**ui, "nodes": nodes, "links": links}


def main() -> None:
    from scripts.qwen_image_edit_workflow import unpacked
    from scripts.workflow_files import substituted, template_ui, workspace_registry, write_workflow

    registry = workspace_registry(sys.argv[1])
    for name, (template, transformer) in WORKFLOWS.items():
        substitute = {**SUBSTITUTE, "UNETLoader": [(0, transformer)]}
        ui = without_alpha_join(substituted(unpacked(template_ui(template)), substitute))
        write_workflow(name, ui, registry)


if __name__ == "__main__":
    main()
