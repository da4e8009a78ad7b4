"""Record upstream ComfyUI 0.10.0's outputs and /object_info of the model-free LTX-2 latent and image nodes
(EmptyLTXVLatentVideo, LTXVConcatAVLatent, LTXVSeparateAVLatent, LTXVCropGuides, LTXVPreprocess) as a test
fixture for tests/nodes/test_ltxv_av.py. The inputs come from `cases()`, which the test imports, so both sides
see the same tensors.

Run inside ComfyUI 0.10.0's own environment (commit 79cdbc81 of hiddenswitch/ComfyUI; it imports ComfyUI's
modules, nothing of ComfyUI is copied here; recipe in ../shared/reference/running-real-comfyui.md):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim> <venv>/bin/python \\
        /work/main/scripts/record_comfyui_ltxv_av.py /work/main/tests/nodes/fixtures/comfyui_ltxv_av.json
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import torch

EMPTY_CASES = [(768, 512, 97, 1), (96, 64, 9, 2), (100, 70, 1, 1), (64, 64, 17, 3)]
PREPROCESS_CASES = [((2, 34, 50, 3), 35), ((1, 33, 49, 3), 10), ((1, 32, 32, 3), 0), ((1, 48, 64, 3), 100)]


def cases() -> dict[str, Any]:
    """The inputs of every recorded call, rebuilt from a fixed seed."""
    g = torch.Generator().manual_seed(39)
    video = {"samples": torch.randn(1, 4, 3, 2, 2, generator=g)}
    audio = {"samples": torch.randn(1, 8, 5, 4, generator=g), "sample_rate": 16000, "type": "audio"}
    video_mask = torch.rand(1, 1, 3, 1, 1, generator=g)
    audio_mask = torch.rand(1, 8, 5, 4, generator=g)
    concat = [
        (video, audio),
        ({**video, "noise_mask": video_mask}, audio),
        (video, {**audio, "noise_mask": audio_mask}),
    ]
    keyframes = torch.tensor([[[[0, 1], [3, 4]], [[0, 1], [3, 4]], [[0, 1], [3, 4]]]], dtype=torch.float32)
    keyframes = keyframes.expand(1, 3, 2, 2).repeat_interleave(2, dim=2)  # 2 guides, 2 tokens each
    guided = [[torch.ones(1, 2, 4), {"keyframe_idxs": keyframes, "frame_rate": 25.0}]]
    plain = [[torch.zeros(1, 2, 4), {"frame_rate": 25.0}]]
    latent = {"samples": torch.randn(1, 4, 6, 2, 3, generator=g)}
    crop = [
        (guided, plain, latent),
        (plain, plain, latent),
        (guided, guided, {**latent, "noise_mask": torch.rand(1, 1, 6, 1, 1, generator=g)}),
    ]
    images = [(torch.rand(shape, generator=g), crf) for shape, crf in PREPROCESS_CASES]
    return {"concat": concat, "crop": crop, "preprocess": images}


def plain(value: Any) -> Any:
    """JSON form: tensors as {"shape", "values"}, nested latents as {"nested": [...]}, None kept."""
    if isinstance(value, torch.Tensor):
        return {"shape": list(value.shape), "values": value.flatten().tolist()}
    if getattr(value, "is_nested", False):
        return {"nested": [plain(t) for t in value.unbind()]}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def record() -> dict:
    sys.argv = [sys.argv[0], "--cpu"]
    sys.path.insert(0, ".")
    import comfy.options

    comfy.options.enable_args_parsing()
    import server  # noqa: F401
    import utils.install_util  # noqa: F401  (before nodes: comfy/ on the path shadows the utils package)

    import nodes  # noqa: F401

    lt = importlib.import_module("comfy_extras.nodes_lt")
    out: dict = {"object_info": {}}
    names = ("EmptyLTXVLatentVideo", "LTXVConcatAVLatent", "LTXVSeparateAVLatent", "LTXVCropGuides", "LTXVPreprocess")
    for name in names:
        info = getattr(lt, name).GET_NODE_INFO_V1()
        info["python_module"] = "comfy_extras.nodes_lt"
        out["object_info"][name] = info
    out["empty"] = [list(lt.EmptyLTXVLatentVideo.execute(*c).result[0]["samples"].shape) for c in EMPTY_CASES]
    inputs = cases()
    out["concat"], out["separate"] = [], []
    for video, audio in inputs["concat"]:
        joined = lt.LTXVConcatAVLatent.execute(video, audio).result[0]
        out["concat"].append(plain(joined))
        out["separate"].append(plain(list(lt.LTXVSeparateAVLatent.execute(joined).result)))
    out["crop"] = [plain(list(lt.LTXVCropGuides.execute(p, n, dict(lat)).result)) for p, n, lat in inputs["crop"]]
    # The decoded frames are whole multiples of 1/255: kept as 0..255 integers.
    out["preprocess"] = [
        plain((lt.LTXVPreprocess.execute(img, crf).result[0] * 255).round().to(torch.uint8))
        for img, crf in inputs["preprocess"]
    ]
    return out


if __name__ == "__main__":
    with open(sys.argv[1], "w") as f:
        json.dump(record(), f, separators=(",", ":"), default=str)
        f.write("\n")
