"""Write workflows_json/union_controlnet_sdxl.json and its web-UI twin (.ui.json): SDXL with a union ControlNet on
the tiny files: sdxl-tiny's text encoders and VAE (CheckpointLoaderSimple), sdxl-union-base-tiny as the MODEL
(UNETLoader: sdxl-tiny's UNet is too narrow for the union ControlNet's residuals), the example image as the hint,
controlnet-union-sdxl-promax-tiny told "depth" by SetUnionControlNetType and applied by ControlNetApplyAdvanced,
KSampler euler 4 steps at 128x96, VAEDecode, SaveImage.

    python scripts/union_controlnet_workflow.py"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from workflow_ui import to_ui  # noqa: E402

NAME = "union_controlnet_sdxl"


def api() -> dict:
    return {
        "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "sdxl-tiny.safetensors"}},
        "2": {
            "class_type": "UNETLoader",
            "inputs": {"unet_name": "sdxl-union-base-tiny.safetensors", "weight_dtype": "default"},
        },
        "3": {"class_type": "CLIPTextEncode", "inputs": {"text": "a stone bridge over a river", "clip": ["1", 1]}},
        "4": {"class_type": "CLIPTextEncode", "inputs": {"text": "blurry", "clip": ["1", 1]}},
        "5": {"class_type": "LoadImage", "inputs": {"image": "example.png"}},
        "6": {
            "class_type": "ControlNetLoader",
            "inputs": {"control_net_name": "controlnet-union-sdxl-promax-tiny.safetensors"},
        },
        "7": {"class_type": "SetUnionControlNetType", "inputs": {"control_net": ["6", 0], "type": "depth"}},
        "8": {
            "class_type": "ControlNetApplyAdvanced",
            "inputs": {
                "positive": ["3", 0],
                "negative": ["4", 0],
                "control_net": ["7", 0],
                "image": ["5", 0],
                "strength": 0.8,
                "start_percent": 0.0,
                "end_percent": 1.0,
            },
        },
        "9": {"class_type": "EmptyLatentImage", "inputs": {"width": 128, "height": 96, "batch_size": 1}},
        "10": {
            "class_type": "KSampler",
            "inputs": {
                "model": ["2", 0],
                "seed": 3,
                "steps": 4,
                "cfg": 3.0,
                "sampler_name": "euler",
                "scheduler": "normal",
                "positive": ["8", 0],
                "negative": ["8", 1],
                "latent_image": ["9", 0],
                "denoise": 1.0,
            },
        },
        "11": {"class_type": "VAEDecode", "inputs": {"samples": ["10", 0], "vae": ["1", 2]}},
        "12": {"class_type": "SaveImage", "inputs": {"filename_prefix": "union_controlnet", "images": ["11", 0]}},
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
