"""Tiny stand-ins for Marigold V2's files (Comfy-Org/marigold-v2-0): its base model, Qwen-Image-Edit 2509 stored as
ComfyUI's int8 ConvRot file (qwen_image_edit_2509_int8_convrot: every transformer-block linear layer's weight int8
with a per-row `weight_scale` and its `comfy_quant` JSON, rows rotated by Hadamard groups before quantizing; the tiny
widths take groups of 16 columns instead of 256), made from qwen-image-tiny's transformer by comfy-kitchen's
quantizer; and a task conditioning for ConditioningLoader (Save Conditioning's layout: a `conditioning` tensor, here
8 tokens as wide as the tiny text encoder). The task LoRA and VAE are Qwen-Image's layouts, so the family's tiny
LoRA and VAE stand in for them (scripts/templates_render.py's DEMO_FILES)."""

from __future__ import annotations

import importlib.util
import json
import logging
from pathlib import Path

import torch
from safetensors.torch import save_file

from .comfy_quant import INT8, MARKER
from .qwen_image_demo import SEED, TEXT_WIDTH, tiny_qwen_image_state_dicts

FILES = {
    "transformer": "diffusion_models/qwen_image_edit_2509_int8_convrot_tiny.safetensors",
    "conditioning": "embeddings/marigold_v2_conditioning_tiny.safetensors",
}
CONVROT_GROUP = 16
log = logging.getLogger(__name__)


def int8_convrot(sd: dict[str, torch.Tensor], blocks: str = "transformer_blocks.") -> dict[str, torch.Tensor]:
    """`sd` with its transformer blocks' (keys under `blocks`) linear weights quantized as ComfyUI's int8 ConvRot
    files store them."""
    try:
        from comfy_kitchen.tensor.int8 import TensorWiseINT8Layout
    except ImportError as e:  # comfy-kitchen is installed on Linux and Windows only, and not on the GPU machine
        raise ValueError(f"int8 ConvRot weights need comfy-kitchen, which is not installed here ({e})") from None

    config = json.dumps({"format": INT8, "convrot": True, "convrot_groupsize": CONVROT_GROUP}).encode("utf-8")
    out = dict(sd)
    for key, weight in sd.items():
        if not (key.startswith(blocks) and key.endswith(".weight") and weight.ndim == 2):
            continue
        if weight.shape[1] % CONVROT_GROUP:
            continue
        layer = key[: -len("weight")]
        codes, params = TensorWiseINT8Layout.quantize(
            weight.float(), per_channel=True, convrot=True, convrot_groupsize=CONVROT_GROUP
        )
        out[key] = codes
        out[layer + "weight_scale"] = params.scale.reshape(-1).float()
        out[layer + MARKER] = torch.tensor(list(config), dtype=torch.uint8)
    return out


def conditioning(seed: int = SEED) -> torch.Tensor:
    return torch.randn(1, 8, TEXT_WIDTH, generator=torch.Generator().manual_seed(seed + 50))


def build_demo_marigold(models_dir: Path) -> list[Path]:
    """The int8 ConvRot transformer and the conditioning under a ComfyUI models folder; returns the paths (none
    where comfy-kitchen, which quantizes the transformer, is missing: no GPU check reads these files)."""
    if importlib.util.find_spec("comfy_kitchen") is None:
        log.warning("comfy-kitchen is not installed: the tiny Marigold V2 files (%s) are not written", FILES)
        return []
    tensors = {
        "transformer": int8_convrot(tiny_qwen_image_state_dicts()["transformer"]),
        "conditioning": {"conditioning": conditioning()},
    }
    written = []
    for name, sd in tensors.items():
        path = Path(models_dir) / FILES[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in sd.items()}, str(path), metadata={"format": "pt"})
        written.append(path)
    return written
