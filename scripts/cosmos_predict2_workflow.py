"""Write the Cosmos Predict2 workflows (API format) on the tiny demo files: workflows_json/cosmos_predict2_2b_t2i.json
(text to image: UNETLoader, CLIPLoader type cosmos on the old T5-XXL, CLIPTextEncode for both prompts,
EmptySD3LatentImage 64x64, KSampler euler/simple cfg 4 for 4 steps, VAELoader on the Wan 2.1 VAE, VAEDecode,
SaveImage) and workflows_json/cosmos_predict2_2b_i2v.json (Video2World from example.png:
CosmosPredict2ImageToVideoLatent 64x48, 9 frames, 3 steps, the last decoded frame saved through ImageFromBatch).
The web UI's template package has no Cosmos template, so these follow ComfyUI's Cosmos Predict2 example graphs at
tiny sizes. Run from the repository root: `python scripts/cosmos_predict2_workflow.py`."""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "workflows_json"
PROMPT = "a red fox in the snow, photo"


def _common(unet: str) -> dict:
    return {
        "1": {"class_type": "UNETLoader", "inputs": {"unet_name": unet, "weight_dtype": "default"}},
        "2": {"class_type": "CLIPLoader", "inputs": {"clip_name": "oldt5_xxl_tiny.safetensors", "type": "cosmos"}},
        "3": {"class_type": "CLIPTextEncode", "inputs": {"text": PROMPT, "clip": ["2", 0]}},
        "4": {"class_type": "CLIPTextEncode", "inputs": {"text": "", "clip": ["2", 0]}},
        "7": {"class_type": "VAELoader", "inputs": {"vae_name": "wan_2.1_vae_tiny.safetensors"}},
    }


def _sampler(steps: int) -> dict:
    return {
        "class_type": "KSampler",
        "inputs": {
            "seed": 42,
            "steps": steps,
            "cfg": 4.0,
            "sampler_name": "euler",
            "scheduler": "simple",
            "denoise": 1.0,
            "model": ["1", 0],
            "positive": ["3", 0],
            "negative": ["4", 0],
            "latent_image": ["5", 0],
        },
    }


def text_to_image() -> dict:
    return {
        **_common("cosmos_predict2_2B_t2i_tiny.safetensors"),
        "5": {"class_type": "EmptySD3LatentImage", "inputs": {"width": 64, "height": 64, "batch_size": 1}},
        "6": _sampler(4),
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["6", 0], "vae": ["7", 0]}},
        "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "cosmos_predict2_t2i", "images": ["8", 0]}},
    }


def image_to_video() -> dict:
    return {
        **_common("cosmos_predict2_2B_video2world_tiny.safetensors"),
        "10": {"class_type": "LoadImage", "inputs": {"image": "example.png"}},
        "5": {
            "class_type": "CosmosPredict2ImageToVideoLatent",
            "inputs": {
                "vae": ["7", 0],
                "width": 64,
                "height": 48,
                "length": 9,
                "batch_size": 1,
                "start_image": ["10", 0],
            },
        },
        "6": _sampler(3),
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["6", 0], "vae": ["7", 0]}},
        "11": {"class_type": "ImageFromBatch", "inputs": {"image": ["8", 0], "batch_index": 8, "length": 1}},
        "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "cosmos_predict2_i2v", "images": ["11", 0]}},
    }


WORKFLOWS = {"cosmos_predict2_2b_t2i": text_to_image, "cosmos_predict2_2b_i2v": image_to_video}


def main() -> None:
    for name, build in WORKFLOWS.items():
        (OUT / f"{name}.json").write_text(json.dumps(build(), indent=2) + "\n")


if __name__ == "__main__":
    main()
