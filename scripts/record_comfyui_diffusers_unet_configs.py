"""Record ComfyUI's comfy.model_detection.unet_config_from_diffusers_unet on diffusers-layout UNet key sets (only
the keys and shapes it reads: down-block attentions and resnets, conv_in, the class / add embedding, cross-attention
widths) of the SD-family models it knows and of two it does not, as the fixture of
tests/packs/test_surface_inside_functions.py.

Run inside ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here):

    cd <ComfyUI source> && PYTHONPATH=. <ComfyUI venv>/bin/python /work/main/scripts/record_comfyui_diffusers_unet_configs.py \\
        /work/main/tests/packs/fixtures/comfyui_diffusers_unet_configs.json

The committed fixture was recorded with ComfyUI 0.10.0, whose environment's torchvision was built for another
torch: there comfy_bridge.packs.torchvision_ops.make_torchvision_importable() ran first (PYTHONPATH with
/work/main), then this script's main().
"""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import comfyui_on_cpu

out_path = sys.argv[1]
comfyui_on_cpu()
import comfy.model_detection  # noqa: E402
import comfyui_version  # noqa: E402


def shapes(
    levels: list, channels: int = 320, inputs: int = 4, context: int = 768, embedding: tuple[str, int] | None = None
) -> dict[str, list[int]]:
    """levels: per down block, (transformer counts of its attentions, or None without attentions; resnets)."""
    out = {"conv_in.weight": [channels, inputs, 3, 3]}
    for i, (attentions, resnets) in enumerate(levels):
        for r in range(resnets):
            out[f"down_blocks.{i}.resnets.{r}.conv1.weight"] = [channels, channels, 3, 3]
        for a, count in enumerate(attentions or []):
            out[f"down_blocks.{i}.attentions.{a}.proj_in.weight"] = [channels, channels]
            for t in range(count):
                out[f"down_blocks.{i}.attentions.{a}.transformer_blocks.{t}.attn2.to_k.weight"] = [channels, context]
    if embedding is not None:
        out[f"{embedding[0]}.linear_1.weight"] = [1280, embedding[1]]
    return out


SD = [([1, 1], 2), ([1, 1], 2), ([1, 1], 2), (None, 2)]
XL = [(None, 2), ([2, 2], 2), ([10, 10], 2)]
CASES = {
    "sd15": shapes(SD),
    "sd21": shapes(SD, context=1024),
    "sd15_inpaint": shapes(SD, inputs=9),
    "sd21_unclip_h": shapes(SD, context=1024, embedding=("class_embedding", 2048)),
    "sd21_unclip_l": shapes(SD, context=1024, embedding=("class_embedding", 1536)),
    "lotus_d": shapes(SD, context=1024, embedding=("class_embedding", 4)),
    "sdxl": shapes(XL, context=2048, embedding=("add_embedding", 2816)),
    "sdxl_inpaint": shapes(XL, inputs=9, context=2048, embedding=("add_embedding", 2816)),
    "sdxl_ip2p": shapes(XL, inputs=8, context=2048, embedding=("add_embedding", 2816)),
    "sdxl_refiner": shapes(
        [(None, 2), ([4, 4], 2), ([4, 4], 2), (None, 2)], channels=384, context=1280, embedding=("add_embedding", 2560)
    ),
    "ssd_1b": shapes([(None, 2), ([2, 2], 2), ([4, 4], 2)], context=2048, embedding=("add_embedding", 2816)),
    "segmind_vega": shapes([(None, 2), ([1, 1], 2), ([2, 2], 2)], context=2048, embedding=("add_embedding", 2816)),
    "koala_700m": shapes([(None, 1), ([2], 1), ([5], 1)], context=2048, embedding=("add_embedding", 2816)),
    "koala_1b": shapes([(None, 1), ([2], 1), ([6], 1)], context=2048, embedding=("add_embedding", 2816)),
    "sdxl_mid_cnet": shapes([(None, 2), (None, 2), ([1, 1], 2)], context=2048, embedding=("add_embedding", 2816)),
    "sdxl_small_cnet": shapes([(None, 2), (None, 2), (None, 2)], embedding=("add_embedding", 2816)),
    "sd09_xs": shapes([([1], 1), ([1], 1), ([1], 1)], context=1024),
    "sd_xs": shapes([(None, 1), ([1], 1), ([1], 1)]),
    "unknown_context": shapes(XL, context=1024, embedding=("add_embedding", 2816)),
    "unknown_width": shapes(SD, channels=256),
    "no_conv_in": {"down_blocks.0.resnets.0.conv1.weight": [320, 320, 3, 3]},
}


def main() -> None:
    cases = []
    for name, keys in CASES.items():
        sd = {k: torch.empty(shape, device="meta") for k, shape in keys.items()}
        config = comfy.model_detection.unet_config_from_diffusers_unet(sd)
        cases.append({"name": name, "shapes": keys, "config": config})
    with open(out_path, "w") as f:
        json.dump({"comfyui": comfyui_version.__version__, "cases": cases}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
