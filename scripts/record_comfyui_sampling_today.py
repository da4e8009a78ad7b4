"""Record upstream ComfyUI 0.10.0's outputs and /object_info of the model-free LTX-Video sampling nodes
(LTXVScheduler's sigmas, ModelSamplingLTXV's schedule, LTXVConditioning's values) and of ScaleROPE (the image
position ids its options give ComfyUI's Flux network, for FLUX.1's 2x2 patches and FLUX.2's 1x1) as a test fixture.

Run inside ComfyUI 0.10.0's own environment (commit 79cdbc81 of hiddenswitch/ComfyUI; it imports ComfyUI's
modules, nothing of ComfyUI is copied here; recipe in ../shared/reference/running-real-comfyui.md):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim> <venv>/bin/python \\
        /work/main/scripts/record_comfyui_sampling_today.py /work/main/tests/nodes/fixtures/comfyui_sampling_today.json
"""

from __future__ import annotations

import importlib
import json
import sys
from types import SimpleNamespace

import torch

# (steps, max_shift, base_shift, stretch, terminal, latent shape or None)
SCHEDULER_CASES = [
    (20, 2.05, 0.95, True, 0.1, None),
    (8, 2.05, 0.95, False, 0.1, None),
    (10, 1.5, 0.5, True, 0.3, [1, 128, 3, 16, 24]),
    (1, 2.05, 0.95, True, 0.1, [1, 4, 8, 8]),
    (30, 0.0, 0.0, True, 0.0, [2, 4, 5, 32, 32]),
]
# (max_shift, base_shift, latent shape or None); the patched MODEL's sampling read at these percents
SAMPLING_CASES = [(2.05, 0.95, None), (1.5, 0.5, [1, 4, 16, 16]), (2.05, 0.95, [1, 128, 7, 16, 24])]
PERCENTS = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]
# (latent height, width, patch size, axes, ScaleROPE's scale_x, shift_x, scale_y, shift_y, scale_t, shift_t)
ROPE_CASES = [
    (8, 12, 2, 3, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0),
    (8, 12, 2, 3, 2.0, 0.0, 0.5, 0.0, 1.0, 0.0),
    (6, 10, 2, 3, 1.3, -4.5, 0.7, 16.2, 1.0, 3.0),
    (7, 5, 1, 4, 0.0, 1.0, 100.0, -256.0, 2.0, 0.5),
    (4, 4, 1, 4, 1.0, 0.1, 1.0, 0.2, 1.0, 0.3),
]


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
    for node in (lt.LTXVScheduler, lt.ModelSamplingLTXV, lt.LTXVConditioning):
        info = node.GET_NODE_INFO_V1()
        info["python_module"] = "comfy_extras.nodes_lt"
        out["object_info"][info["name"]] = info
    out["scheduler"] = []
    for steps, hi, lo, stretch, terminal, shape in SCHEDULER_CASES:
        latent = None if shape is None else {"samples": torch.zeros(shape)}
        out["scheduler"].append(lt.LTXVScheduler.execute(steps, hi, lo, stretch, terminal, latent).result[0].tolist())
    out["sampling"] = []
    for hi, lo, shape in SAMPLING_CASES:
        patched: list = []
        model_clone = SimpleNamespace(add_object_patch=lambda name, obj, into=patched: into.append(obj))
        model = SimpleNamespace(model=SimpleNamespace(model_config=None), clone=lambda c=model_clone: c)
        latent = None if shape is None else {"samples": torch.zeros(shape)}
        lt.ModelSamplingLTXV.execute(model, hi, lo, latent)
        ms = patched[0]
        out["sampling"].append(
            {
                "shift": ms.shift,
                "percent_to_sigma": [float(ms.percent_to_sigma(p)) for p in PERCENTS],
                "sigma_min": float(ms.sigma_min),
                "sigma_max": float(ms.sigma_max),
            }
        )
    rope = importlib.import_module("comfy_extras.nodes_rope")
    info = rope.ScaleROPE.GET_NODE_INFO_V1()
    info["python_module"] = "comfy_extras.nodes_rope"
    out["object_info"]["ScaleROPE"] = info
    flux = importlib.import_module("comfy.ldm.flux.model").Flux
    out["rope_ids"] = []
    for h, w, patch, axes, sx, tx, sy, ty, st, tt in ROPE_CASES:
        net = SimpleNamespace(patch_size=patch, params=SimpleNamespace(axes_dim=[8] * axes))
        options = {
            "rope_options": {"scale_x": sx, "shift_x": tx, "scale_y": sy, "shift_y": ty, "scale_t": st, "shift_t": tt}
        }
        _, ids = flux.process_img(net, torch.zeros(1, 4, h, w), transformer_options=options)
        out["rope_ids"].append(ids[0].tolist())
    pos, neg = lt.LTXVConditioning.execute([[torch.ones(1, 2, 3), {"a": 1}]], [[torch.zeros(1, 2, 3), {}]], 24.5).result
    out["conditioning"] = {"positive": pos[0][1], "negative": neg[0][1]}
    return out


if __name__ == "__main__":
    with open(sys.argv[1], "w") as f:
        json.dump(record(), f, indent=1, default=str)
        f.write("\n")
