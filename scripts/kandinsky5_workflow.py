"""Write workflows_json/kandinsky5_t2v.ui.json / .json and kandinsky5_i2v.ui.json / .json: the web UI's Kandinsky 5
text-to-video and image-to-video templates (video_kandinsky5_t2v / video_kandinsky5_i2v) with their own graphs, the
subgraph unpacked in place under fresh node ids (scripts/templates_render.py's `flat_workflow`: the i2v subgraph's
inner ids repeat the instance's), the tiny files substituted for the
downloads (kandinsky5-tiny's DiT, the tiny Qwen2.5-VL and long CLIP-L, hunyuan-video-vae-tiny; the i2v template's
kandinsky5lite_i2v DiT has the t2v one's layout, so the tiny t2v file stands in for it), example.png as the start
image, 64x48 and 33 frames in place of 768x512 and 121 (9 latent frames: NormalizeVideoLatentStart
matches the 4 start frames to the 5 after them), 3 steps in place of 50 and a fixed seed 42. The API format is
our UI converter's output. Also kandinsky5_t2i.ui.json / .json: the text-to-image template (image_kandinsky5_t2i)
on the tiny image DiT (below).

    python scripts/kandinsky5_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
WORKFLOWS = {  # our name -> the template
    "kandinsky5_t2v": "video_kandinsky5_t2v",
    "kandinsky5_i2v": "video_kandinsky5_i2v",
}
VAE = "hunyuan_video_vae_tiny.safetensors"  # HunyuanVideo 1.0's VAE, as the templates load
SUBSTITUTE = {
    "DualCLIPLoader": [(0, "qwen_2.5_vl_7b_tiny.safetensors"), (1, "hidream_tiny_clip_l.safetensors")],
    "UNETLoader": [(0, "kandinsky5lite_t2v_tiny.safetensors")],
    "VAELoader": [(0, VAE)],
    "LoadImage": [(0, "example.png")],
    "Kandinsky5ImageToVideo": [(0, 64), (1, 48), (2, 33)],
    "KSampler": [(0, 42), (1, "fixed"), (2, 3)],
    "ImageScale": [(1, 64), (2, 48)],
}
SIZES = {768: 64, 512: 48}
# The image template (image_kandinsky5_t2i) on the tiny image DiT of demo-models (nodes/models/kandinsky5_demo.py:
# 2560 wide, one block), flux-tiny's VAE for ae.safetensors, 64x48, 3 steps, seed 42.
IMAGE_TEMPLATE = "image_kandinsky5_t2i"
IMAGE_WORKFLOW = "kandinsky5_t2i"
IMAGE_DIT = "kandinsky5lite_t2i_tiny.safetensors"
IMAGE_SUBSTITUTE = {
    "DualCLIPLoader": SUBSTITUTE["DualCLIPLoader"],
    "UNETLoader": [(0, IMAGE_DIT)],
    "VAELoader": [(0, "flux-tiny-ae.safetensors")],
    "EmptyLatentImage": [(0, 64), (1, 48)],
    "KSampler": SUBSTITUTE["KSampler"],
}  # the i2v template's width / height primitives -> tiny sizes


def tiny_template(template: str) -> dict:
    from scripts.templates_render import flat_workflow
    from scripts.workflow_files import tiny_template_ui

    flat = tiny_template_ui(template, SUBSTITUTE, flat_workflow)
    for node in flat["nodes"]:
        if node["type"] == "PrimitiveInt" and node["widgets_values"][0] in SIZES:
            node["widgets_values"][0] = SIZES[node["widgets_values"][0]]
    return flat


def image_workflow_ui() -> dict:
    from scripts.templates_render import flat_workflow
    from scripts.workflow_files import tiny_template_ui

    return tiny_template_ui(IMAGE_TEMPLATE, IMAGE_SUBSTITUTE, flat_workflow)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    registry = workspace_registry(sys.argv[1])
    for name, template in WORKFLOWS.items():
        write_workflow(name, tiny_template(template), registry)
    write_workflow(IMAGE_WORKFLOW, image_workflow_ui(), registry)


if __name__ == "__main__":
    main()
