"""Record upstream ComfyUI 0.10.0's model-patch functions of today's core nodes (Temporal Score Rescaling's
post-CFG function) on seeded tensors, as a test fixture.

Run inside ComfyUI 0.10.0's own environment (commit 79cdbc81 of hiddenswitch/ComfyUI; it imports ComfyUI's
modules, nothing of ComfyUI is copied here; recipe in ../shared/reference/running-real-comfyui.md):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim> <venv>/bin/python \\
        /work/main/scripts/record_comfyui_today_patches.py /work/main/tests/nodes/fixtures/comfyui_today_patches.json
"""
from __future__ import annotations

import importlib
import json
import sys
from types import SimpleNamespace

import torch

# (tsr_k, tsr_sigma, sigma, flow model: rectified flow (CONST) or not)
TSR_CASES = [(0.95, 1.0, 14.6, False), (0.95, 1.0, 0.5, False), (0.5, 2.0, 0.03, False), (3.0, 0.1, 1.0, False),
             (1.0, 1.0, 2.0, False), (0.95, 1.0, 0.0, False), (0.8, 1.0, 0.9, True), (2.0, 0.5, 0.2, True)]


def inputs() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(37)
    return {"x": torch.randn(1, 4, 3, 5, generator=gen), "denoised": torch.randn(1, 4, 3, 5, generator=gen)}


def record() -> dict:
    sys.argv = [sys.argv[0], "--cpu"]
    sys.path.insert(0, ".")
    import comfy.options
    comfy.options.enable_args_parsing()
    import utils.install_util  # noqa: F401  (before nodes: comfy/ on the path shadows the utils package)
    import nodes  # noqa: F401
    import comfy.model_sampling as ms
    eps = importlib.import_module("comfy_extras.nodes_eps")
    x = inputs()
    out = []
    for k, tsr_sigma, sigma, flow in TSR_CASES:
        captured = []
        patcher = SimpleNamespace(set_model_sampler_post_cfg_function=captured.append)
        patcher.clone = lambda p=patcher: p
        eps.TemporalScoreRescaling.execute(patcher, k, tsr_sigma)
        sampling = ms.CONST() if flow else ms.EPS()
        model = SimpleNamespace(current_patcher=SimpleNamespace(get_model_object=lambda name, s=sampling: s))
        result = captured[0]({"denoised": x["denoised"], "input": x["x"], "sigma": torch.tensor([sigma]),
                              "model": model})
        out.append(result.flatten().tolist())
    return {"tsr": out}


if __name__ == "__main__":
    with open(sys.argv[1], "w") as f:
        json.dump(record(), f)
        f.write("\n")
