"""Record ComfyUI's batch, cond-batching, camera and keyframe helpers on fixed tensors, as a test fixture.

Run inside ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here):

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \
        /work/main/scripts/record_comfyui_surface_patching.py /work/main/tests/packs/fixtures/comfyui_surface_patching.json

Inputs are built from torch.arange / fixed numbers (the test rebuilds them the same way); outputs are stored
as nested lists. Cases: comfy.controlnet.broadcast_image_to, comfy.samplers.get_area_and_mult (area with
feathering, mask with strength, timestep range), can_concat_cond / cond_cat on CONDRegular entries,
comfy_extras.nodes_stable3d.camera_embeddings, comfy.hooks.InterpolationMethod.get_weights and
comfy.patcher_extension.merge_nested_dicts.
"""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import comfyui_on_cpu

out_path = sys.argv[1]
comfyui_on_cpu()
import comfy.conds  # noqa: E402
import comfy.controlnet  # noqa: E402
import comfy.hooks  # noqa: E402
import comfy.patcher_extension  # noqa: E402
import comfy.samplers  # noqa: E402
from comfy_extras.nodes_stable3d import camera_embeddings  # noqa: E402


def images(n: int) -> torch.Tensor:
    return torch.arange(n * 2 * 2, dtype=torch.float32).reshape(n, 1, 2, 2)


broadcast = []
for n, target, batched in [(1, 4, 2), (2, 4, 2), (3, 4, 2), (2, 6, 2), (5, 6, 3), (4, 4, 1), (2, 8, 2), (3, 3, 1)]:
    r = comfy.controlnet.broadcast_image_to(images(n), target, batched)
    broadcast.append({"n": n, "target": target, "batched": batched, "out": r[:, 0, 0, 0].tolist()})


def x_in() -> torch.Tensor:
    return torch.arange(2 * 2 * 16 * 12, dtype=torch.float32).reshape(2, 2, 16, 12) / 100


def mask() -> torch.Tensor:
    return (torch.arange(16 * 12, dtype=torch.float32).reshape(1, 16, 12) % 7) / 7


def entry(**kw) -> dict:
    return {
        "model_conds": {"c_crossattn": comfy.conds.CONDRegular(torch.ones(1, 3, 4) * kw.pop("ctx", 1.0))},
        "uuid": "u",
        **kw,
    }


area_cases = {
    "plain": entry(),
    "area_inner": entry(area=(8, 6, 4, 3), strength=0.5),
    "area_corner": entry(area=(8, 6, 0, 0)),
    "area_overflow": entry(area=(20, 20, 10, 2)),
    "mask": entry(mask=mask(), mask_strength=0.8, strength=1.5),
    "mask_area": entry(mask=mask(), area=(8, 6, 4, 3)),
    "timestep_out": entry(timestep_start=5.0),
    "timestep_end_out": entry(timestep_end=20.0),
    "timestep_in": entry(timestep_start=15.0, timestep_end=5.0),
}
areas = {}
t = torch.tensor([10.0, 10.0])
for name, c in area_cases.items():
    r = comfy.samplers.get_area_and_mult(c, x_in(), t)
    if r is None:
        areas[name] = None
        continue
    areas[name] = {
        "area": r.area,
        "input_shape": list(r.input_x.shape),
        "input_first": r.input_x[0, 0, 0, 0].item(),
        "mult_shape": list(r.mult.shape),
        "mult": r.mult[1, 1].tolist(),
        "cond_shape": list(r.conditioning["c_crossattn"].cond.shape),
    }

a = comfy.samplers.get_area_and_mult(entry(ctx=1.0), x_in(), t)
b = comfy.samplers.get_area_and_mult(entry(ctx=2.0), x_in(), t)
c = comfy.samplers.get_area_and_mult(entry(area=(8, 6, 4, 3)), x_in(), t)
concat = {
    "same": comfy.samplers.can_concat_cond(a, b),
    "other_area": comfy.samplers.can_concat_cond(a, c),
    "cat": comfy.samplers.cond_cat([a.conditioning, b.conditioning])["c_crossattn"].tolist(),
}

cameras = [
    {"elevation": e, "azimuth": z, "out": camera_embeddings(e, z).tolist()}
    for e, z in [(0.0, 0.0), (10.0, 30.0), (-25.5, 180.0), (90, -45)]
]

weights = [
    {
        "from": f,
        "to": to,
        "length": n,
        "method": m,
        "reverse": rev,
        "out": comfy.hooks.InterpolationMethod.get_weights(f, to, n, m, reverse=rev).tolist(),
    }
    for f, to, n, m, rev in [
        (0.0, 1.0, 5, "linear", False),
        (1.0, 0.2, 6, "ease_in", False),
        (0.0, 2.0, 4, "ease_out", True),
        (0.5, 1.5, 7, "ease_in_out", False),
    ]
]

d1 = {"a": 1, "l": [1, 2], "n": {"x": [1], "y": {"z": 1}, "k": 1}}
d2 = {"b": 2, "l": [3], "n": {"x": [2], "y": {"w": 2}, "k": 2}}
merged = comfy.patcher_extension.merge_nested_dicts(d1, d2)

with open(out_path, "w") as f:
    json.dump(
        {
            "broadcast_image_to": broadcast,
            "get_area_and_mult": areas,
            "concat": concat,
            "camera_embeddings": cameras,
            "interpolation": weights,
            "merge_nested_dicts": {"d1": d1, "d2": d2, "out": merged},
        },
        f,
    )
    f.write("\n")
