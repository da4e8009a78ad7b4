"""Record upstream ComfyUI 0.10.0's outputs of the model-free utility nodes that exist there (ManualSigmas, the
Batch Images / Masks / Latents nodes, Resize Image/Mask, Latent Cut to Batch, the If/Else switch's lazy choice)
as a test fixture.

Run inside ComfyUI 0.10.0's own environment (commit 79cdbc81 of hiddenswitch/ComfyUI; it imports ComfyUI's
modules, nothing of ComfyUI is copied here; recipe in ../shared/reference/running-real-comfyui.md):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim> <venv>/bin/python \\
        /work/main/scripts/record_comfyui_today_nodes.py /work/main/tests/nodes/fixtures/comfyui_today_nodes.json

Inputs are seeded tensors (`inputs()`, shared with the test); outputs are stored in full (they are small).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys

import torch


def inputs() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(34)
    return {
        "rgb_4x6": torch.rand(1, 4, 6, 3, generator=gen),
        "rgba_5x3": torch.rand(2, 5, 3, 4, generator=gen),
        "mask_4x6": torch.rand(1, 4, 6, generator=gen),
        "mask_3x8": torch.rand(2, 3, 8, generator=gen),
        "latent_4x4": torch.rand(1, 4, 4, 4, generator=gen),
        "latent_2x6": torch.rand(2, 4, 2, 6, generator=gen),
        "image_7x10": torch.rand(1, 7, 10, 3, generator=gen),
        "mask_9x5": torch.rand(2, 9, 5, generator=gen),
        "video_latent": torch.rand(1, 2, 5, 3, 6, generator=gen),
    }


# (resize_type, its inputs, scale method); a "match" input names one of `inputs()`
RESIZE_CASES = [
    ("scale dimensions", {"width": 6, "height": 0, "crop": "center"}, "bilinear"),
    ("scale dimensions", {"width": 8, "height": 4, "crop": "center"}, "area"),
    ("scale dimensions", {"width": 8, "height": 4, "crop": "disabled"}, "nearest-exact"),
    ("scale dimensions", {"width": 0, "height": 0, "crop": "disabled"}, "area"),
    ("scale by multiplier", {"multiplier": 1.5}, "bicubic"),
    ("scale longer dimension", {"longer_size": 5}, "area"),
    ("scale shorter dimension", {"shorter_size": 12}, "bilinear"),
    ("scale width", {"width": 13}, "lanczos"),
    ("scale height", {"height": 3}, "area"),
    ("scale total pixels", {"megapixels": 0.0001}, "bilinear"),
    ("match size", {"match": "mask_3x8", "crop": "center"}, "bilinear"),
    ("scale to multiple", {"multiple": 4}, "bilinear"),
    ("scale to multiple", {"multiple": 3}, "nearest-exact"),
]
RESIZE_INPUTS = ["image_7x10", "mask_9x5"]
LATENT_CUT_CASES = [
    ("video_latent", "t", 2),
    ("video_latent", "t", 3),
    ("video_latent", "x", 4),
    ("video_latent", "y", 9),
    ("latent_2x6", "x", 4),
    ("latent_2x6", "y", 1),
    ("latent_2x6", "t", 1),
]
SIGMAS_TEXTS = ["1, 0.5", "14.6, 7.0 3.1,0", "-1.5e3 +2 .25", "no numbers", "1..5, 2"]


def _values(tensor: torch.Tensor) -> dict:
    return {"shape": list(tensor.shape), "values": tensor.flatten().tolist()}


def _sigmas(node: type, text: str) -> list[float] | dict:
    try:
        return node.execute(text).result[0].tolist()
    except ValueError as ex:  # a text ComfyUI cannot read: the test expects an error too
        return {"error": type(ex).__name__}


def record() -> dict:
    sys.argv = [sys.argv[0], "--cpu"]
    sys.path.insert(0, ".")
    import comfy.options

    comfy.options.enable_args_parsing()
    import server  # noqa: F401
    import utils.install_util  # noqa: F401  (before nodes: comfy/ on the path shadows the utils package)

    import nodes  # noqa: F401

    sampler = importlib.import_module("comfy_extras.nodes_custom_sampler")
    post = importlib.import_module("comfy_extras.nodes_post_processing")
    x = inputs()
    out: dict = {"manual_sigmas": {t: _sigmas(sampler.ManualSigmas, t) for t in SIGMAS_TEXTS}}
    out["batch_images"] = _values(
        post.BatchImagesNode.execute({"image0": x["rgb_4x6"], "image1": x["rgba_5x3"]}).result[0]
    )
    out["batch_masks"] = _values(
        post.BatchMasksNode.execute({"mask0": x["mask_4x6"], "mask1": x["mask_3x8"]}).result[0]
    )
    latent = post.BatchLatentsNode.execute(
        {"latent0": {"samples": x["latent_4x4"]}, "latent1": {"samples": x["latent_2x6"], "batch_index": [5, 6]}}
    ).result[0]
    out["batch_latents"] = {**_values(latent["samples"]), "batch_index": latent["batch_index"]}
    out["resize"] = {}
    for i, (mode, params, method) in enumerate(RESIZE_CASES):
        given = {k: x[v] if k == "match" else v for k, v in params.items()}
        for name in RESIZE_INPUTS:
            result = post.ResizeImageMaskNode.execute(x[name], method, {"resize_type": mode, **given}).result[0]
            out["resize"][f"{i}-{name}"] = _values(result)
    latent_module = importlib.import_module("comfy_extras.nodes_latent")
    out["latent_cut"] = {}
    for name, dim, size in LATENT_CUT_CASES:
        result = latent_module.LatentCutToBatch.execute({"samples": x[name]}, dim, size).result[0]["samples"]
        out["latent_cut"][f"{name}-{dim}-{size}"] = _values(result)
    logic = importlib.import_module("comfy_extras.nodes_logic")
    # check_lazy_status: which input it asks for, per (switch, on_false, on_true) with None = linked, not computed
    out["switch_lazy"] = {
        f"{s}-{f}-{t}": logic.SwitchNode.check_lazy_status(s, f, t)
        for s in (True, False)
        for f in (None, 1)
        for t in (None, 2)
    }
    return out


if __name__ == "__main__":
    asyncio.run(asyncio.sleep(0))
    with open(sys.argv[1], "w") as f:
        json.dump(record(), f, indent=1)
        f.write("\n")
