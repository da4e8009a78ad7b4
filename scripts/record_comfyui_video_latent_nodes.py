"""Record upstream ComfyUI 0.10.0's outputs of its model-free video latent nodes as a test fixture: Replace Video
Latent Frames (comfy_extras/nodes_latent.py; seeded video latents, several frame indices: negative, out of range,
no source), Trim Video Latent (nodes_wan) and Normalize Video Latent Start (nodes_kandinsky5).

Run inside ComfyUI 0.10.0's own environment (as scripts/record_comfyui_today_nodes.py says; nothing of ComfyUI is
copied here):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim> <venv>/bin/python \\
        /work/main/scripts/record_comfyui_video_latent_nodes.py /work/main/tests/nodes/fixtures/comfyui_video_latent_nodes.json
"""

from __future__ import annotations

import importlib
import json
import sys

import torch

# (source frames or None, index)
CASES = [(2, 0), (2, 3), (1, -1), (3, -3), (2, 4), (2, 6), (6, 0), (None, 2)]
TRIMS = [0, 2, 5, 7]
# (frames, start_frame_count, reference_frame_count)
NORMALIZE_CASES = [(9, 4, 5), (6, 2, 2), (3, 1, 9), (5, 4, 1), (1, 4, 5)]


def video(frames: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(2, 3, frames, 4, 5, generator=gen) * 1.7 + 0.4


def latents(source_frames: int | None) -> tuple[dict, dict | None]:
    gen = torch.Generator().manual_seed(34)
    dest = {"samples": torch.rand(1, 2, 5, 3, 2, generator=gen), "noise_mask": torch.ones(1, 1, 5, 3, 2)}
    if source_frames is None:
        return dest, None
    return dest, {"samples": torch.rand(1, 2, source_frames, 3, 2, generator=gen), "batch_index": [7]}


def record() -> dict:
    sys.argv = [sys.argv[0], "--cpu"]
    sys.path.insert(0, ".")
    import comfy.options

    comfy.options.enable_args_parsing()
    # utils before server and nodes: comfy/ on the path shadows the utils package
    import utils.install_util  # noqa: F401, I001
    import server  # noqa: F401
    import nodes  # noqa: F401

    importlib.import_module("comfy_extras.nodes_post_processing")  # first: it and nodes_latent import each other
    node = importlib.import_module("comfy_extras.nodes_latent").ReplaceVideoLatentFrames
    out = []
    for frames, index in CASES:
        dest, source = latents(frames)
        result = node.execute(dest, index, source).result[0]
        out.append(
            {
                "source_frames": frames,
                "index": index,
                "keys": sorted(result),
                "shape": list(result["samples"].shape),
                "values": result["samples"].flatten().tolist(),
            }
        )
    trim = importlib.import_module("comfy_extras.nodes_wan").TrimVideoLatent
    trims = []
    for amount in TRIMS:
        result = trim.execute({"samples": video(5, 1), "batch_index": [3, 4]}, amount).result[0]
        trims.append(
            {
                "trim_amount": amount,
                "keys": sorted(result),
                "shape": list(result["samples"].shape),
                "values": result["samples"].flatten().tolist(),
            }
        )
    normalize = importlib.import_module("comfy_extras.nodes_kandinsky5").NormalizeVideoLatentStart
    norms = []
    for frames, start, ref in NORMALIZE_CASES:
        result = normalize.execute({"samples": video(frames, 2)}, start, ref).result[0]
        norms.append(
            {
                "frames": frames,
                "start": start,
                "reference": ref,
                "shape": list(result["samples"].shape),
                "values": result["samples"].flatten().tolist(),
            }
        )
    return {
        "source": "ComfyUI 0.10.0 (hiddenswitch/ComfyUI 79cdbc81): comfy_extras.nodes_latent."
        "ReplaceVideoLatentFrames, nodes_wan.TrimVideoLatent, nodes_kandinsky5.NormalizeVideoLatentStart",
        "cases": out,
        "trim": trims,
        "normalize": norms,
    }


if __name__ == "__main__":
    with open(sys.argv[1], "w") as f:
        json.dump(record(), f)
