"""Write workflows_json/hunyuan_video_t2v.ui.json / .json: the web UI's HunyuanVideo 1.0 text-to-video template
(hunyuan_video_text_to_video) with its own graph (SamplerCustomAdvanced: euler, simple, ModelSamplingSD3 at shift 7,
FluxGuidance 6, VAEDecodeTiled, CreateVideo / SaveVideo) on the tiny files (hunyuan-video-tiny's text-to-video DiT,
llava_llama3_tiny and the tiny long CLIP-L, hunyuan-video-vae-tiny), 64x48 and 33 frames in place of 848x480 and 73,
3 steps in place of 20 and a fixed seed 42. The API format is our UI converter's output.

    python scripts/hunyuan_video_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
WORKFLOWS = {"hunyuan_video_t2v": "hunyuan_video_text_to_video"}  # our name -> the template
SUBSTITUTE = {
    "DualCLIPLoader": [(0, "hidream_tiny_clip_l.safetensors"), (1, "llava_llama3_tiny.safetensors")],
    "UNETLoader": [(0, "hunyuan_video_t2v_tiny.safetensors")],
    "VAELoader": [(0, "hunyuan_video_vae_tiny.safetensors")],
    "EmptyHunyuanLatentVideo": [(0, 64), (1, 48), (2, 33)],
    "BasicScheduler": [(1, 3)],
    "RandomNoise": [(0, 42), (1, "fixed")],
}


I2V_DIT = {"v1 (concat)": "hunyuan_video_i2v_tiny.safetensors", "v2 (replace)": "hunyuan_video_t2v_tiny.safetensors"}


def image_to_video_prompt(t2v: dict, guidance_type: str) -> dict:
    """The shipped text-to-video prompt made image-to-video as ComfyUI's HunyuanVideo examples wire it: example.png
    through HunyuanImageToVideo (64x48, 33 frames) between FluxGuidance and the guider / sampler, the DiT its
    guidance type wants (v1 concat: the 33-channel file; v2 replace: the 16-channel one), and the prompt read by
    TextEncodeHunyuanVideo_ImageToVideo with example.png's llava tokens (llava_llama3_vision_tiny, center crop,
    image_interleave 2)."""
    prompt = {k: {**v, "inputs": dict(v["inputs"])} for k, v in t2v.items()}
    (unet,) = [k for k, v in prompt.items() if v["class_type"] == "UNETLoader"]
    (guidance,) = [k for k, v in prompt.items() if v["class_type"] == "FluxGuidance"]
    (guider,) = [k for k, v in prompt.items() if v["class_type"] == "BasicGuider"]
    (sampler,) = [k for k, v in prompt.items() if v["class_type"] == "SamplerCustomAdvanced"]
    (vae,) = [k for k, v in prompt.items() if v["class_type"] == "VAELoader"]
    prompt[unet]["inputs"]["unet_name"] = I2V_DIT[guidance_type]
    prompt["901"] = {"class_type": "LoadImage", "inputs": {"image": "example.png"}}
    prompt["902"] = {
        "class_type": "HunyuanImageToVideo",
        "inputs": {
            "positive": [guidance, 0],
            "vae": [vae, 0],
            "width": 64,
            "height": 48,
            "length": 33,
            "batch_size": 1,
            "guidance_type": guidance_type,
            "start_image": ["901", 0],
        },
    }
    (text,) = [k for k, v in prompt.items() if v["class_type"] == "CLIPTextEncode"]
    prompt["903"] = {"class_type": "CLIPVisionLoader", "inputs": {"clip_name": "llava_llama3_vision_tiny.safetensors"}}
    prompt["904"] = {
        "class_type": "CLIPVisionEncode",
        "inputs": {"clip_vision": ["903", 0], "image": ["901", 0], "crop": "center"},
    }
    prompt[text] = {
        "class_type": "TextEncodeHunyuanVideo_ImageToVideo",
        "inputs": {
            "clip": prompt[text]["inputs"]["clip"],
            "clip_vision_output": ["904", 0],
            "prompt": prompt[text]["inputs"]["text"],
            "image_interleave": 2,
        },
    }
    prompt[guider]["inputs"]["conditioning"] = ["902", 0]
    prompt[sampler]["inputs"]["latent_image"] = ["902", 1]
    return prompt


def tiny_template(template: str) -> dict:
    from scripts.workflow_files import tiny_template_ui

    return tiny_template_ui(template, SUBSTITUTE)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    registry = workspace_registry(sys.argv[1])
    for name, template in WORKFLOWS.items():
        write_workflow(name, tiny_template(template), registry)


if __name__ == "__main__":
    main()
