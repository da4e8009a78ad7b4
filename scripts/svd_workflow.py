"""Write workflows_json/txt_to_image_to_video.ui.json / .json: the web UI's "Text to Image to Video" template
(txt_to_image_to_video of the installed comfyui-workflow-templates-json package: an SDXL image made from the prompt
starts a Stable Video Diffusion video) with its own node graph, sdxl-tiny in place of sd_xl_base_1.0 and
svd_xt-tiny (nodes/models/svd_demo.py) in place of svd_xt (templates_render's rules), both noise seeds fixed,
96 x 64 pixels, 5 frames and 3 steps per sampler; everything else as shipped (the prompts, uni_pc_bh2 at cfg 8 for
the image, euler / karras at cfg 2.5 through VideoLinearCFGGuidance at min_cfg 1 for the video, motion bucket 127 at
6 fps, CreateVideo at 10 fps and SaveVideo). The API format is our UI converter's output.

    python scripts/svd_workflow.py <workspace with demo-models>
    python scripts/svd_workflow.py <workspace with demo-models> --init-image <file.pt>

The second form writes the workflow's SDXL image (the image half run in-process, as float) for
scripts/record_comfyui_svd_workflow.py, which runs the video half in ComfyUI from it.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
NAME = "txt_to_image_to_video"
SEED = 42
WIDTH, HEIGHT, FRAMES, STEPS = 96, 64, 5, 3
SUBSTITUTE = {
    "CheckpointLoaderSimple": [(0, "sdxl-tiny.safetensors")],
    "ImageOnlyCheckpointLoader": [(0, "svd_xt-tiny.safetensors")],
    "KSampler": [(0, SEED), (1, "fixed"), (2, STEPS)],
    "EmptyLatentImage": [(0, WIDTH), (1, HEIGHT)],
    "SVD_img2vid_Conditioning": [(0, WIDTH), (1, HEIGHT), (2, FRAMES)],
}


def shipped_prompt() -> dict:
    return json.loads((REPO / "workflows_json" / f"{NAME}.json").read_text())


def image_node(prompt: dict) -> str:
    """The node whose IMAGE starts the video: SVD_img2vid_Conditioning's init_image."""
    (conditioning,) = [v for v in prompt.values() if v["class_type"] == "SVD_img2vid_Conditioning"]
    return conditioning["inputs"]["init_image"][0]


def sd_image(workspace: Path):
    """The workflow's image half run in-process with our nodes on `workspace`: the float IMAGE it hands SVD."""
    import nodes
    from nodes import workspace as ws_module

    ws_module.activate(ws_module.Workspace(workspace))
    prompt = shipped_prompt()
    results: dict[str, tuple] = {}

    def run(node_id: str) -> tuple:
        if node_id not in results:
            node = prompt[node_id]
            inputs = {k: run(v[0])[v[1]] if isinstance(v, list) else v for k, v in node["inputs"].items()}
            cls = nodes.NODE_CLASS_MAPPINGS[node["class_type"]]()
            out = getattr(cls, cls.FUNCTION)(**inputs)
            results[node_id] = asyncio.run(out) if inspect.isawaitable(out) else out
        return results[node_id]

    return run(image_node(prompt))[0]


def main() -> None:
    from scripts.workflow_files import tiny_template_ui, workspace_registry, write_workflow

    workspace = Path(sys.argv[1])
    if "--init-image" in sys.argv:
        import torch

        torch.set_num_threads(1)
        torch.save(sd_image(workspace), sys.argv[sys.argv.index("--init-image") + 1])
        return
    write_workflow(NAME, tiny_template_ui(NAME, SUBSTITUTE), workspace_registry(workspace))


if __name__ == "__main__":
    main()
