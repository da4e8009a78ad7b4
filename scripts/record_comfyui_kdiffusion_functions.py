"""Record what ComfyUI's k-diffusion sampler functions and sigma helpers compute on a toy guided denoiser, as
the fixture of tests/packs/test_surface_k_diffusion.py (the functions packs call by name).

Run inside ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here):

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_kdiffusion_functions.py \\
        /work/main/tests/packs/fixtures/comfyui_kdiffusion_functions.json
"""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu

comfyui_on_cpu(sys.argv[1])
import comfy.model_sampling  # noqa: E402
import comfy.samplers  # noqa: E402
from comfy.k_diffusion import sampling as k  # noqa: E402

COMFYUI = "0.10.0 (hiddenswitch/ComfyUI 79cdbc81, upstream's commits)"
SAMPLERS = [
    "euler",
    "euler_ancestral",
    "heun",
    "heunpp2",
    "dpm_2",
    "dpm_2_ancestral",
    "lms",
    "dpmpp_2s_ancestral",
    "dpmpp_sde",
    "dpmpp_2m",
    "dpmpp_2m_sde",
    "dpmpp_2m_sde_heun",
    "dpmpp_3m_sde",
    "ddpm",
    "lcm",
    "ipndm",
    "ipndm_v",
    "res_multistep",
    "res_multistep_ancestral",
    "gradient_estimation",
    "euler_cfg_pp",
    "dpmpp_2m_cfg_pp",
    "er_sde",
    "seeds_2",
    "seeds_3",
    "exp_heun_2_x0",
    "exp_heun_2_x0_sde",
]
OPTIONS = [
    ("euler_ancestral", {"eta": 0.5, "s_noise": 0.8}),
    ("dpmpp_2m_sde", {"solver_type": "heun", "eta": 0.7}),
    ("lms", {"order": 2}),
]


class ToyGuided:
    """CFG 1.7 of two fixed smooth denoisers, post-CFG functions applied with ComfyUI's argument names."""

    def __init__(self, model_sampling) -> None:
        patcher = type("P", (), {"get_model_object": lambda _self, name: model_sampling})()
        base = type("B", (), {"model_sampling": model_sampling})()
        self.inner_model = type(
            "I", (), {"model_patcher": patcher, "model_sampling": model_sampling, "inner_model": base}
        )()

    def __call__(self, x, sigma, model_options=None, seed=None, **kwargs):
        s = sigma.reshape(-1, 1, 1, 1)
        cond, uncond = 0.8 * x / (1 + s) + 0.1 * torch.tanh(x), 0.6 * x / (1 + s * s) ** 0.5 - 0.05
        out = uncond + (cond - uncond) * 1.7
        for fn in (model_options or {}).get("sampler_post_cfg_function", []):
            out = fn(
                {
                    "denoised": out,
                    "cond": None,
                    "uncond": None,
                    "cond_scale": 1.7,
                    "model": None,
                    "uncond_denoised": uncond,
                    "cond_denoised": cond,
                    "sigma": sigma,
                    "model_options": model_options,
                    "input": x,
                }
            )
        return out


def sampler_cases() -> dict:
    x0 = torch.randn(2, 4, 4, 4, generator=torch.Generator().manual_seed(7))
    kinds = {}
    for kind in ("ve", "flow"):
        if kind == "ve":

            class Eps(comfy.model_sampling.ModelSamplingDiscrete, comfy.model_sampling.EPS):
                pass

            ms = Eps()
            sigmas = k.get_sigmas_karras(6, float(ms.sigma_min), float(ms.sigma_max))
        else:

            class Flow(comfy.model_sampling.ModelSamplingDiscreteFlow, comfy.model_sampling.CONST):
                pass

            ms = Flow()
            ms.set_parameters(shift=3.0)
            sigmas = comfy.samplers.simple_scheduler(ms, 6)
        x = ms.noise_scaling(sigmas[0], x0, torch.zeros_like(x0), max_denoise=True)
        runs = []
        for name, options in [(n, {}) for n in SAMPLERS] + OPTIONS:
            seen = []
            out = getattr(k, f"sample_{name}")(
                ToyGuided(ms),
                x.clone(),
                sigmas.clone(),
                extra_args={"seed": 123, "model_options": {}},
                callback=lambda d: seen.append(d),
                disable=True,
                **options,
            )
            runs.append(
                {
                    "sampler": name,
                    "options": options,
                    "out": b64(out),
                    "steps": len(seen),
                    "first_x": b64(seen[0]["x"]),
                    "last_denoised": b64(seen[-1]["denoised"]),
                }
            )
        kinds[kind] = {"sigmas": b64(sigmas), "x": b64(x), "runs": runs}
    return kinds


def helpers() -> dict:
    x = torch.zeros(1, 2, 3, 3)
    down, up = k.get_ancestral_step(torch.tensor(3.0), torch.tensor(1.2), eta=0.8)
    brownian = k.BrownianTreeNoiseSampler(x, torch.tensor(0.03), torch.tensor(14.6), seed=5, cpu=True)
    return {
        "karras": k.get_sigmas_karras(5, 0.03, 14.6, rho=6.0).tolist(),
        "exponential": k.get_sigmas_exponential(5, 0.03, 14.6).tolist(),
        "polyexponential": k.get_sigmas_polyexponential(5, 0.03, 14.6, rho=1.5).tolist(),
        "vp": k.get_sigmas_vp(5).tolist(),
        "laplace": k.get_sigmas_laplace(5, 0.03, 14.6, mu=0.2).tolist(),
        "ancestral_step": [float(down), float(up)],
        "default_noise": b64(k.default_noise_sampler(x, seed=9)(None, None)),
        "brownian": b64(brownian(torch.tensor(7.0), torch.tensor(2.0))),
    }


if __name__ == "__main__":
    torch.set_num_threads(1)
    with open(sys.argv[1], "w") as f:
        json.dump(
            {
                "comfyui": COMFYUI,
                "recorded_by": "scripts/record_comfyui_kdiffusion_functions.py",
                "samplers": sampler_cases(),
                "helpers": helpers(),
            },
            f,
        )
