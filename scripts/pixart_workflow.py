"""Write workflows_json/pixart_sigma_text_to_image.json and its web-UI twin (.ui.json): text to image on the tiny
PixArt-Σ (UNETLoader), its T5 (CLIPLoader type pixart), the prompt through CLIPTextEncodePixArtAlpha and the negative
through CLIPTextEncode, KSampler, sd1-tiny-vae. No frontend template exists for PixArt; this is the graph ComfyUI's
PixArt examples use, at 384x320 (ComfyUI's PixArt positions need a latent whose mean side is over 32).
scripts/record_comfyui_pixart.py runs the same API file in ComfyUI 0.3.64.

    python scripts/pixart_workflow.py"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from workflow_ui import to_ui  # noqa: E402

NAME = "pixart_sigma_text_to_image"


def api() -> dict:
    return {
        "1": {
            "class_type": "UNETLoader",
            "inputs": {"unet_name": "PixArt-Sigma-XL-2-1024-MS_tiny.safetensors", "weight_dtype": "default"},
        },
        "2": {"class_type": "CLIPLoader", "inputs": {"clip_name": "flux-tiny-t5.safetensors", "type": "pixart"}},
        "3": {
            "class_type": "CLIPTextEncodePixArtAlpha",
            "inputs": {"width": 1024, "height": 768, "text": "a lighthouse at dusk, oil painting", "clip": ["2", 0]},
        },
        "4": {"class_type": "CLIPTextEncode", "inputs": {"text": "blurry, low quality", "clip": ["2", 0]}},
        "5": {"class_type": "EmptyLatentImage", "inputs": {"width": 384, "height": 320, "batch_size": 1}},
        "6": {
            "class_type": "KSampler",
            "inputs": {
                "model": ["1", 0],
                "seed": 21,
                "steps": 4,
                "cfg": 4.5,
                "sampler_name": "euler",
                "scheduler": "normal",
                "positive": ["3", 0],
                "negative": ["4", 0],
                "latent_image": ["5", 0],
                "denoise": 1.0,
            },
        },
        "7": {"class_type": "VAELoader", "inputs": {"vae_name": "sd1-tiny-vae.safetensors"}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["6", 0], "vae": ["7", 0]}},
        "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "pixart", "images": ["8", 0]}},
    }


def main() -> None:
    from comfy_bridge import compat
    from comfy_bridge.formats import ui_to_api
    from comfy_bridge.registry import NodeRegistry

    compat.install()
    import nodes

    registry = NodeRegistry()
    registry.add_builtin(nodes.NODE_CLASS_MAPPINGS)
    out = REPO / "workflows_json" / NAME
    prompt = api()
    ui = to_ui(prompt, registry)
    back = {k: {"class_type": v["class_type"], "inputs": v["inputs"]} for k, v in ui_to_api(ui, registry).items()}
    if back != prompt:
        raise SystemExit(f"the UI file does not convert back to the API file: {back}")
    out.with_suffix(".json").write_text(json.dumps(prompt, indent=2) + "\n")
    out.with_suffix(".ui.json").write_text(json.dumps(ui, indent=2) + "\n")


if __name__ == "__main__":
    main()
