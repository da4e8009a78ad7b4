"""Write workflows_json/hunyuan_video15_i2v.ui.json / .json and hunyuan_video15_t2v.ui.json / .json: the web UI's
HunyuanVideo 1.5 720p image-to-video and text-to-video templates (video_hunyuan_video_1.5_720p_i2v / _t2v) on the
tiny files (nodes/models/hunyuan_video15_demo.py): their own graphs with the SigLIP, Qwen2.5-VL, ByT5,
DiT and VAE files substituted, example.png as the start image, 64x48 and 5 frames in place of 1280x720
and 121, 3 steps in place of 20, seed 42. Their 1080p super-resolution stage stays muted as shipped
(HunyuanVideo15SuperResolution / HunyuanVideo15LatentUpscaleWithModel are not offered yet); the API format is our
UI converter's output.

    python scripts/hunyuan_video15_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
WORKFLOWS = {  # our name -> the template
    "hunyuan_video15_i2v": "video_hunyuan_video_1.5_720p_i2v",
    "hunyuan_video15_t2v": "video_hunyuan_video_1.5_720p_t2v",
}
SUBSTITUTE = {
    "CLIPVisionLoader": [(0, "sigclip-vision-tiny.safetensors")],
    "DualCLIPLoader": [
        (0, "qwen_2.5_vl_7b_hunyuan_video15_tiny.safetensors"),
        (1, "byt5_small_glyphxl_tiny.safetensors"),
    ],
    "UNETLoader": [(0, "hunyuanvideo1.5_tiny.safetensors")],
    "VAELoader": [(0, "hunyuanvideo15_vae_tiny.safetensors")],
    "LoadImage": [(0, "example.png")],
    "HunyuanVideo15ImageToVideo": [(0, 64), (1, 48), (2, 5)],
    "EmptyHunyuanVideo15Latent": [(0, 64), (1, 48), (2, 5)],
    "BasicScheduler": [(1, 3)],
    "RandomNoise": [(0, 42)],
}


def main() -> None:
    from scripts.workflow_files import tiny_template_ui, workspace_registry, write_workflow

    registry = workspace_registry(sys.argv[1])
    for name, template in WORKFLOWS.items():
        write_workflow(name, tiny_template_ui(template, SUBSTITUTE), registry)


if __name__ == "__main__":
    main()
