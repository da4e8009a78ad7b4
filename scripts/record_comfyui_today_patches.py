"""Record upstream ComfyUI 0.10.0's model-patch functions and samplers of today's core nodes (Temporal Score
Rescaling's post-CFG function; SamplerSEEDS2's settings of k-diffusion's seeds_2 on a toy guided denoiser, seed 123)
on seeded tensors, as a test fixture.

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
TSR_CASES = [
    (0.95, 1.0, 14.6, False),
    (0.95, 1.0, 0.5, False),
    (0.5, 2.0, 0.03, False),
    (3.0, 0.1, 1.0, False),
    (1.0, 1.0, 2.0, False),
    (0.95, 1.0, 0.0, False),
    (0.8, 1.0, 0.9, True),
    (2.0, 0.5, 0.2, True),
]


# SamplerSEEDS2's (solver_type, eta, s_noise, r), run on an epsilon model ("ve") and a rectified-flow one ("flow")
SEEDS2_CASES = [
    ("phi_1", 1.0, 1.0, 0.5),
    ("phi_1", 1.0, 0.8, 0.3),
    ("phi_2", 0.0, 1.0, 1.0),
    ("phi_2", 1.0, 1.0, 1.0),
    ("phi_2", 0.5, 1.0, 0.5),
]


def toy_guided(x: torch.Tensor, sigma: torch.Tensor, cfg: float = 1.7) -> torch.Tensor:
    """A fixed smooth guided denoiser: CFG of two smooth predictions of x0 at sigma."""
    s = sigma.reshape(-1, 1, 1, 1)
    cond = 0.8 * x / (1 + s) + 0.1 * torch.tanh(x)
    uncond = 0.6 * x / (1 + s * s) ** 0.5 - 0.05
    return uncond + (cond - uncond) * cfg


def inputs() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(37)
    return {"x": torch.randn(1, 4, 3, 5, generator=gen), "denoised": torch.randn(1, 4, 3, 5, generator=gen)}


def record() -> dict:
    sys.argv = [sys.argv[0], "--cpu"]
    sys.path.insert(0, ".")
    import comfy.options

    comfy.options.enable_args_parsing()
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
        result = captured[0](
            {"denoised": x["denoised"], "input": x["x"], "sigma": torch.tensor([sigma]), "model": model}
        )
        out.append(result.flatten().tolist())
    return {"tsr": out, "seeds2": _seeds2(ms)}


def _seeds2(ms) -> list[dict]:
    import comfy.samplers
    from comfy.k_diffusion import sampling as k

    class Eps(ms.ModelSamplingDiscrete, ms.EPS):
        pass

    class Flow(ms.ModelSamplingDiscreteFlow, ms.CONST):
        pass

    out = []
    x0 = torch.randn(2, 4, 4, 4, generator=torch.Generator().manual_seed(7))
    for kind in ("ve", "flow"):
        sampling = Eps() if kind == "ve" else Flow()
        if kind == "ve":
            sigmas = k.get_sigmas_karras(6, float(sampling.sigma_min), float(sampling.sigma_max))
        else:
            sampling.set_parameters(shift=3.0)
            sigmas = comfy.samplers.simple_scheduler(sampling, 6)

        def model(x, sigma, **kwargs):
            return toy_guided(x, sigma)

        model.inner_model = SimpleNamespace(model_patcher=SimpleNamespace(get_model_object=lambda n, s=sampling: s))
        for solver_type, eta, s_noise, r in SEEDS2_CASES:
            x = sampling.noise_scaling(sigmas[0], x0, torch.zeros_like(x0), max_denoise=True)
            result = k.sample_seeds_2(
                model,
                x.clone(),
                sigmas.clone(),
                extra_args={"seed": 123},
                disable=True,
                eta=eta,
                s_noise=s_noise,
                r=r,
                solver_type=solver_type,
            )
            out.append(
                {
                    "kind": kind,
                    "case": [solver_type, eta, s_noise, r],
                    "sigmas": sigmas.tolist(),
                    "x": x.flatten().tolist(),
                    "out": result.flatten().tolist(),
                    "shape": list(x.shape),
                }
            )
    return out


if __name__ == "__main__":
    with open(sys.argv[1], "w") as f:
        json.dump(record(), f)
        f.write("\n")
