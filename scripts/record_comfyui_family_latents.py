"""Record upstream ComfyUI 0.10.0's outputs of seven model-free nodes of model families Comfy Cluster does not run yet:
the empty latents of Mochi, Cosmos, Stable Cascade, Hunyuan Image and Qwen-Image-Layered, Stable Cascade's stage B
conditioning and the SD x4 upscaler's conditioning, as a test fixture (tests/nodes/test_family_latent_nodes.py), and
the interface of the one newer than 0.3.64 (EmptyQwenImageLayeredLatentImage; copied into
tests/nodes/fixtures/comfyui_today_object_info.json).

Run inside ComfyUI 0.10.0's own environment (commit 79cdbc81 of hiddenswitch/ComfyUI; it imports ComfyUI's
modules, nothing of ComfyUI is copied here; recipe in ../shared/reference/running-real-comfyui.md):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim> <venv>/bin/python \\
        /work/main/scripts/record_comfyui_family_latents.py /work/main/tests/nodes/fixtures/comfyui_family_latents.json
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys

import torch

# (node, module, inputs) of the empty latents, sizes that divide and that do not
EMPTY_CASES = [
    ("EmptyMochiLatentVideo", "comfy_extras.nodes_mochi", {"width": 848, "height": 480, "length": 25, "batch_size": 1}),
    ("EmptyMochiLatentVideo", "comfy_extras.nodes_mochi", {"width": 100, "height": 36, "length": 8, "batch_size": 2}),
    (
        "EmptyCosmosLatentVideo",
        "comfy_extras.nodes_cosmos",
        {"width": 1280, "height": 704, "length": 121, "batch_size": 1},
    ),
    ("EmptyCosmosLatentVideo", "comfy_extras.nodes_cosmos", {"width": 70, "height": 30, "length": 10, "batch_size": 3}),
    (
        "StableCascade_EmptyLatentImage",
        "comfy_extras.nodes_stable_cascade",
        {"width": 1024, "height": 1024, "compression": 42, "batch_size": 1},
    ),
    (
        "StableCascade_EmptyLatentImage",
        "comfy_extras.nodes_stable_cascade",
        {"width": 300, "height": 260, "compression": 7, "batch_size": 2},
    ),
    ("EmptyHunyuanImageLatent", "comfy_extras.nodes_hunyuan", {"width": 2048, "height": 2048, "batch_size": 1}),
    ("EmptyHunyuanImageLatent", "comfy_extras.nodes_hunyuan", {"width": 100, "height": 70, "batch_size": 2}),
    (
        "EmptyQwenImageLayeredLatentImage",
        "comfy_extras.nodes_qwen",
        {"width": 640, "height": 640, "layers": 3, "batch_size": 1},
    ),
    (
        "EmptyQwenImageLayeredLatentImage",
        "comfy_extras.nodes_qwen",
        {"width": 100, "height": 36, "layers": 0, "batch_size": 2},
    ),
]
# (scale_ratio, noise_augmentation) of SD_4XUpscale_Conditioning on a 2x6x5 image
UPSCALE_CASES = [(4.0, 0.0), (2.5, 0.3), (1.0, 1.0), (0.1, 0.0)]


def inputs() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(34)
    return {
        "image": torch.rand(2, 6, 5, 3, generator=gen),
        "cond": torch.rand(1, 3, 8, generator=gen),
        "pooled": torch.rand(1, 8, generator=gen),
        "stage_c": torch.rand(1, 16, 3, 4, generator=gen),
    }


def _values(tensor: torch.Tensor) -> dict:
    return {"shape": list(tensor.shape), "dtype": str(tensor.dtype), "values": tensor.flatten().tolist()}


def _latent(latent: dict) -> dict:
    return {
        "keys": sorted(latent),
        "samples": {"shape": list(latent["samples"].shape), "zero": not latent["samples"].any().item()},
    }


def record() -> dict:
    sys.argv = [sys.argv[0], "--cpu"]
    sys.path.insert(0, ".")
    import comfy.options
    import utils.install_util  # noqa: F401  (before server: once comfy/ is on the path its utils.py shadows the package)

    comfy.options.enable_args_parsing()
    import server  # noqa: F401

    import nodes  # noqa: F401

    x = inputs()
    out: dict = {"empty": []}
    # the interface of the node newer than 0.3.64 (the others are in 0.3.64's recorded /object_info)
    info = importlib.import_module("comfy_extras.nodes_qwen").EmptyQwenImageLayeredLatentImage.GET_NODE_INFO_V1()
    out["object_info"] = {info["name"]: {**info, "python_module": "comfy_extras.nodes_qwen"}}
    for name, module, given in EMPTY_CASES:
        result = getattr(importlib.import_module(module), name).execute(**given).result
        out["empty"].append({"node": name, "inputs": given, "outputs": [_latent(r) for r in result]})
    conditioning = [[x["cond"], {"pooled_output": x["pooled"]}]]
    cascade = importlib.import_module("comfy_extras.nodes_stable_cascade")
    (stage_b,) = cascade.StableCascade_StageB_Conditioning.execute(conditioning, {"samples": x["stage_c"]}).result
    out["stage_b"] = {
        "keys": sorted(stage_b[0][1]),
        "prior_is_stage_c": stage_b[0][1]["stable_cascade_prior"] is x["stage_c"],
    }
    upscale = importlib.import_module("comfy_extras.nodes_sdupscale")
    out["sd4x"] = []
    for scale, noise in UPSCALE_CASES:
        try:
            pos, neg, latent = upscale.SD_4XUpscale_Conditioning.execute(
                x["image"], conditioning, conditioning, scale, noise
            ).result
        except ZeroDivisionError as ex:  # an image smaller than 4 pixels after scaling: ComfyUI fails
            out["sd4x"].append({"scale_ratio": scale, "noise_augmentation": noise, "error": type(ex).__name__})
            continue
        out["sd4x"].append(
            {
                "scale_ratio": scale,
                "noise_augmentation": noise,
                "positive_keys": sorted(pos[0][1]),
                "negative_keys": sorted(neg[0][1]),
                "concat_image": _values(pos[0][1]["concat_image"]),
                "latent": _latent(latent),
            }
        )
    return out


if __name__ == "__main__":
    asyncio.run(asyncio.sleep(0))
    with open(sys.argv[1], "w") as f:
        json.dump(record(), f, indent=1)
        f.write("\n")
