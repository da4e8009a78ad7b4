"""Record what ComfyUI's guidance functions, table schedulers and k-diffusion samplers compute, on fixed small
tensors and a toy denoiser, as a fixture; and dump the published noise-level tables its table schedulers ship.

Run inside ComfyUI's own environment (it imports ComfyUI's modules and runs their code; nothing of ComfyUI
is copied here):

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_sampling_functions.py \\
        /work/main/tests/nodes/fixtures/comfyui_sampling_functions.json.xz /work/main/nodes/library/noise_levels.json

- Guidance nodes (APG, Mahiro, TCFG, FreSca, LatentApplyOperationCFG, PerpNeg's formula, DifferentialDiffusion)
  run on a stand-in MODEL (`Recorder`) whose setters capture the registered function; the function is then
  called with ComfyUI's argument dicts built from seeded tensors.
- Samplers: each k-diffusion sampler function runs on a toy guided denoiser, a fixed smooth function of
  (x, sigma) per side combined by CFG, that honours model_options' post-CFG functions as ComfyUI's CFG does
  (what the CFG++ samplers read the negative prediction through).
Tensors are stored as float32 (base64).
"""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, write_json

comfyui_on_cpu(sys.argv[1], sys.argv[2])
import comfy.model_sampling  # noqa: E402
import comfy.samplers  # noqa: E402
from comfy.k_diffusion import sa_solver  # noqa: E402
from comfy.k_diffusion import sampling as k  # noqa: E402
from comfy_extras import (  # noqa: E402
    nodes_advanced_samplers,
    nodes_align_your_steps,
    nodes_apg,
    nodes_differential_diffusion,
    nodes_fresca,
    nodes_gits,
    nodes_latent,
    nodes_mahiro,
    nodes_optimalsteps,
    nodes_perpneg,
    nodes_tcfg,
)

COMFYUI = "0.10.0 (hiddenswitch/ComfyUI 79cdbc81, upstream's commits)"


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class Recorder:
    """Just enough of a ModelPatcher: records the functions the guidance nodes register."""

    def __init__(self) -> None:
        self.fns: dict[str, object] = {}

    def clone(self) -> Recorder:
        return self

    def set_model_sampler_pre_cfg_function(self, fn, disable_cfg1_optimization=False) -> None:
        self.fns["pre"] = fn

    def set_model_sampler_post_cfg_function(self, fn, disable_cfg1_optimization=False) -> None:
        self.fns["post"] = fn

    def set_model_denoise_mask_function(self, fn) -> None:
        self.fns["mask"] = fn


def result_of(output):
    return output.result[0] if hasattr(output, "result") else output[0]


def patched(node, *args) -> dict:
    m = Recorder()
    node.execute(m, *args)
    return m.fns


def guidance_cases() -> dict:
    x, cond, uncond = seeded(1, 2, 4, 6, 5), seeded(2, 2, 4, 6, 5), seeded(3, 2, 4, 6, 5)
    cases: dict = {"x": b64(x), "cond": b64(cond), "uncond": b64(uncond)}

    def pre_args(c, u, scale, sigma, skipped=False):
        return {
            "conds": [[{}], None if skipped else [{}]],
            "conds_out": [c, u],
            "cond_scale": scale,
            "timestep": sigma,
            "input": x,
            "sigma": sigma,
            "model": None,
            "model_options": {},
        }

    # APG over a sequence of sigmas (momentum carries between calls; a rising sigma restarts it)
    apg = []
    for eta, norm, momentum in ((1.0, 5.0, 0.0), (0.3, 2.0, -0.5), (-0.5, 0.0, 0.7)):
        fn = patched(nodes_apg.APG, eta, norm, momentum)["pre"]
        outs = []
        for step, sigma in enumerate((14.0, 7.0, 3.0, 9.0, 1.0)):
            c, u = cond * (1 + 0.1 * step), uncond - 0.05 * step
            outs.append(b64(fn(pre_args(c, u, 5.5, torch.tensor([sigma, sigma])))[0]))
        apg.append({"eta": eta, "norm_threshold": norm, "momentum": momentum, "outs": outs})
    cases["apg"] = apg

    post = patched(nodes_mahiro.Mahiro)["post"]
    denoised = uncond + (cond - uncond) * 4.0
    cases["mahiro"] = b64(
        post({"cond_scale": 4.0, "cond_denoised": cond, "uncond_denoised": uncond, "denoised": denoised})
    )

    fn = patched(nodes_tcfg.TCFG)["pre"]
    sigma = torch.tensor([3.0, 3.0])
    cases["tcfg"] = [b64(t) for t in fn(pre_args(cond, uncond, 6.0, sigma))]
    cases["tcfg_skipped"] = [b64(t) for t in fn(pre_args(cond, torch.zeros_like(cond), 1.0, sigma, True))]

    fresca = []
    for low, high, cutoff in ((1.0, 1.25, 20), (0.5, 2.0, 1), (1.3, 0.7, 2)):
        fn = patched(nodes_fresca.FreSca, low, high, cutoff)["pre"]
        fresca.append({"params": [low, high, cutoff], "out": b64(fn(pre_args(cond, uncond, 6.0, sigma))[0])})
    cases["fresca"] = fresca

    ops = []
    for op_node, params in (
        (nodes_latent.LatentOperationTonemapReinhard, (1.3,)),
        (nodes_latent.LatentOperationSharpen, (2, 0.8, 0.4)),
    ):
        operation = result_of(op_node.execute(*params))
        fn = patched(nodes_latent.LatentApplyOperationCFG, operation)["pre"]
        ops.append(
            {
                "operation": op_node.__name__,
                "params": list(params),
                "out": b64(fn(pre_args(cond.clone(), uncond.clone(), 6.0, sigma))[0]),
            }
        )
    cases["latent_operation_cfg"] = ops

    empty = seeded(4, 2, 4, 6, 5)
    cases["empty"] = b64(empty)
    cases["perp_neg"] = [
        {"neg_scale": ns, "cfg": c, "out": b64(nodes_perpneg.perp_neg(x, cond, uncond, empty, ns, c))}
        for ns, c in ((1.0, 8.0), (0.0, 3.0), (2.5, 1.0))
    ]

    # Differential Diffusion: the mask at each sigma of a schedule, for a gradient mask
    ms = comfy.model_sampling.ModelSamplingDiscrete()
    wrapper = type("W", (), {"inner_model": type("I", (), {"model_sampling": ms})()})()
    mask = torch.linspace(0, 1, 2 * 4 * 6 * 5).reshape(2, 4, 6, 5)
    sigmas = k.get_sigmas_karras(6, 0.0291675, 14.614642)
    dd = []
    for strength in (1.0, 0.4):
        fn = patched(nodes_differential_diffusion.DifferentialDiffusion, strength)["mask"]
        for schedule in (sigmas, sigmas[2:]):
            outs = [b64(fn(s.expand(2), mask, {"model": wrapper, "sigmas": schedule})) for s in schedule[:-1]]
            dd.append({"strength": strength, "sigmas": schedule.tolist(), "outs": outs})
    cases["mask"] = b64(mask)
    cases["differential_diffusion"] = dd
    return cases


def scheduler_cases() -> list[dict]:
    cases = []
    for model_type in ("SD1", "SDXL", "SVD"):
        for steps, denoise in ((10, 1.0), (4, 1.0), (25, 1.0), (10, 0.5), (7, 0.33), (3, 0.0)):
            sig = result_of(nodes_align_your_steps.AlignYourStepsScheduler.execute(model_type, steps, denoise))
            cases.append(
                {"node": "AlignYourStepsScheduler", "inputs": [model_type, steps, denoise], "sigmas": sig.tolist()}
            )
    for coeff in (0.8, 1.2, 1.5, 1.05):
        for steps, denoise in ((2, 1.0), (10, 1.0), (20, 1.0), (27, 1.0), (12, 0.6), (5, 0.0)):
            sig = result_of(nodes_gits.GITSScheduler.execute(coeff, steps, denoise))
            cases.append({"node": "GITSScheduler", "inputs": [coeff, steps, denoise], "sigmas": sig.tolist()})
    for model_type in ("FLUX", "Wan", "Chroma"):
        for steps, denoise in ((10, 1.0), (20, 1.0), (40, 1.0), (3, 1.0), (13, 0.7), (8, 0.0)):
            sig = result_of(nodes_optimalsteps.OptimalStepsScheduler.execute(model_type, steps, denoise))
            cases.append(
                {"node": "OptimalStepsScheduler", "inputs": [model_type, steps, denoise], "sigmas": sig.tolist()}
            )
    return cases


def toy_sides(x: torch.Tensor, sigma: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed smooth denoiser per side: positive and negative predictions of x0 at sigma."""
    s = sigma.reshape(-1, 1, 1, 1)
    cond = 0.8 * x / (1 + s) + 0.1 * torch.tanh(x)
    uncond = 0.6 * x / (1 + s * s) ** 0.5 - 0.05
    return cond, uncond


class ToyGuided:
    """model(x, sigma, model_options=..., seed=...) as ComfyUI's samplers call their model: CFG of the toy's two
    sides, post-CFG functions applied with ComfyUI's argument names."""

    def __init__(self, cfg: float, model_sampling) -> None:
        self.cfg = cfg
        patcher = type("P", (), {"get_model_object": lambda _self, name: model_sampling})()
        self.inner_model = type("I", (), {"model_patcher": patcher, "model_sampling": model_sampling})()

    def __call__(self, x, sigma, model_options=None, seed=None, **kwargs):
        cond, uncond = toy_sides(x, sigma)
        out = uncond + (cond - uncond) * self.cfg
        for fn in (model_options or {}).get("sampler_post_cfg_function", []):
            out = fn(
                {
                    "denoised": out,
                    "cond": None,
                    "uncond": None,
                    "cond_scale": self.cfg,
                    "model": None,
                    "uncond_denoised": uncond,
                    "cond_denoised": cond,
                    "sigma": sigma,
                    "model_options": model_options,
                    "input": x,
                }
            )
        return out


SAMPLERS = [
    "euler_cfg_pp",
    "euler_ancestral_cfg_pp",
    "dpmpp_2s_ancestral_cfg_pp",
    "dpmpp_2m_cfg_pp",
    "res_multistep_cfg_pp",
    "res_multistep_ancestral_cfg_pp",
    "gradient_estimation_cfg_pp",
    "er_sde",
    "seeds_2",
    "seeds_3",
    "sa_solver",
    "sa_solver_pece",
    "dpm_fast",
    "dpm_adaptive",
    "deis",
]
# Sampler-object settings (SamplerER_SDE's solver types, SamplerEulerAncestralCFGPP's eta / s_noise)
OPTIONS = [
    ("er_sde", {"s_noise": 0.0, "max_stage": 2, "scaler_eta": 0.0}),
    ("er_sde", {"s_noise": 0.7, "max_stage": 1, "scaler_eta": 0.5}),
    ("er_sde", {"s_noise": 1.0, "max_stage": 3, "scaler_eta": None}),
    ("euler_ancestral_cfg_pp", {"eta": 0.5, "s_noise": 0.8}),
    (
        "sa_solver",
        {"predictor_order": 2, "corrector_order": 2, "simple_order_2": True, "s_noise": 0.5, "tau": (0.7, 10.0, 0.5)},
    ),
    ("sa_solver", {"predictor_order": 1, "corrector_order": 0, "tau": (0.0, 10.0, 0.5)}),
    ("sa_solver_pece", {"predictor_order": 4, "corrector_order": 3, "tau": (1.2, 100.0, 0.0)}),
    (
        "dpm_adaptive",
        {
            "order": 2,
            "rtol": 0.1,
            "atol": 0.01,
            "h_init": 0.1,
            "pcoeff": 0.1,
            "icoeff": 0.8,
            "dcoeff": 0.05,
            "accept_safety": 0.7,
            "eta": 0.5,
            "s_noise": 0.9,
        },
    ),
    ("dpm_adaptive", {"order": 3, "rtol": 0.01, "atol": 0.001, "h_init": 0.3, "accept_safety": 0.9}),
    ("lcm_upscale", {"total_upscale": 1.5, "upscale_method": "bilinear", "upscale_steps": None}),
    ("lcm_upscale", {"total_upscale": 2.0, "upscale_method": "bislerp", "upscale_steps": 2}),
    ("lcm_upscale", {"total_upscale": 0.75, "upscale_method": "area", "upscale_steps": 9}),
]


def _options(options: dict) -> dict:
    opts = dict(options)
    if "tau" in opts:
        opts["tau_func"] = sa_solver.get_tau_interval_func(opts["tau"][1], opts["tau"][2], eta=opts.pop("tau")[0])
    if "scaler_eta" in opts:
        eta = opts.pop("scaler_eta")
        if eta is not None:
            opts["noise_scaler"] = lambda v, e=eta: v ** (e + 1)
    return opts


def sampler_cases() -> list[dict]:
    cases = []
    x0 = seeded(7, 2, 4, 4, 4)
    runs = [(name, {}) for name in SAMPLERS] + OPTIONS
    for kind in ("ve", "flow", "ve5", "ve7"):
        if kind.startswith("ve"):

            class Eps(comfy.model_sampling.ModelSamplingDiscrete, comfy.model_sampling.EPS):
                pass

            ms = Eps()
            sigmas = k.get_sigmas_karras(int(kind[2:] or 6), float(ms.sigma_min), float(ms.sigma_max))
            if kind != "ve":  # other step counts: dpm_fast's other order patterns
                runs_here = [("dpm_fast", {})]
        else:

            class Flow(comfy.model_sampling.ModelSamplingDiscreteFlow, comfy.model_sampling.CONST):
                pass

            ms = Flow()
            ms.set_parameters(shift=3.0)
            sigmas = comfy.samplers.simple_scheduler(ms, 6)
        for name, options in runs if kind in ("ve", "flow") else runs_here:
            for cfg in (1.0, 1.7):
                x = ms.noise_scaling(sigmas[0], x0, torch.zeros_like(x0), max_denoise=True)
                # dpm_fast / dpm_adaptive take the schedule's ends: ComfyUI's KSAMPLER wrapper passes them
                fn = (
                    comfy.samplers.ksampler(name).sampler_function
                    if name in ("dpm_fast", "dpm_adaptive")
                    else getattr(k, f"sample_{name}", None) or nodes_advanced_samplers.sample_lcm_upscale
                )
                # sample_lcm_upscale draws from torch's global generator: seed it as the others seed theirs
                torch.manual_seed(123)
                seen = []
                out = fn(
                    ToyGuided(cfg, ms),
                    x.clone(),
                    sigmas.clone(),
                    extra_args={"seed": 123, "model_options": {}},
                    callback=lambda d: seen.append(d["denoised"]),
                    disable=True,
                    **_options(options),
                )
                cases.append(
                    {
                        "kind": kind,
                        "sampler": name,
                        "options": options,
                        "cfg": cfg,
                        "sigmas": b64(sigmas),
                        "x": b64(x),
                        "out": b64(out),
                        "last_denoised": b64(seen[-1]),
                    }
                )
    return cases


class EdmRecorder:
    """A ModelPatcher stand-in for ModelSamplingContinuousEDM: records its object patches."""

    def __init__(self) -> None:
        config = type("C", (), {"sampling_settings": {}})()
        self.model = type("M", (), {"model_config": config})()
        self.objects: dict[str, object] = {}

    def clone(self) -> EdmRecorder:
        return self

    def add_object_patch(self, name: str, obj: object) -> None:
        self.objects[name] = obj


def edm_cases() -> list[dict]:
    """What the patched MODEL's model_sampling (and latent format) computes, per sampling option."""
    from comfy_extras import nodes_model_advanced

    x, out, noise = seeded(11, 2, 4, 3, 3), seeded(12, 2, 4, 3, 3), seeded(13, 2, 4, 3, 3)
    sigma = torch.tensor([7.5, 0.3])
    cases = []
    for sampling in ("v_prediction", "edm", "edm_playground_v2.5", "eps", "cosmos_rflow"):
        for sigma_max, sigma_min in ((120.0, 0.002), (80.0, 0.03)):
            m = EdmRecorder()
            nodes_model_advanced.ModelSamplingContinuousEDM().patch(m, sampling, sigma_max, sigma_min)
            ms = m.objects["model_sampling"]
            case = {
                "sampling": sampling,
                "sigma_max": sigma_max,
                "sigma_min": sigma_min,
                "sigmas": b64(ms.sigmas),
                "timestep": b64(ms.timestep(sigma)),
                "sigma_of": [float(ms.sigma(t)) for t in ms.timestep(sigma)],
                "percent_to_sigma": [ms.percent_to_sigma(p) for p in (0.0, 0.2, 0.5, 0.9, 1.0)],
                "input": b64(ms.calculate_input(sigma, x)),
                "denoised": b64(ms.calculate_denoised(sigma, out, x)),
                "noise_scaling": b64(ms.noise_scaling(sigma, noise, x)),
                "noise_scaling_max": b64(ms.noise_scaling(sigma, noise, x, max_denoise=True)),
                "inverse_noise_scaling": b64(ms.inverse_noise_scaling(sigma, x)),
            }
            if "latent_format" in m.objects:
                fmt = m.objects["latent_format"]
                case["process_in"], case["process_out"] = b64(fmt.process_in(x)), b64(fmt.process_out(x))
            cases.append(case)
    return cases


def tables() -> dict:
    return {
        "align_your_steps": nodes_align_your_steps.NOISE_LEVELS,
        "optimal_steps": nodes_optimalsteps.NOISE_LEVELS,
        "gits": {f"{c:.2f}": rows for c, rows in nodes_gits.NOISE_LEVELS.items()},
    }


def main(out_path: str, tables_path: str) -> None:
    torch.set_num_threads(1)
    data = {
        "comfyui": COMFYUI,
        "recorded_by": "scripts/record_comfyui_sampling_functions.py",
        "torch": torch.__version__,
        "toy": "cond = 0.8 x / (1 + s) + 0.1 tanh x; uncond = 0.6 x / sqrt(1 + s^2) - 0.05",
        "guidance": guidance_cases(),
        "schedulers": scheduler_cases(),
        "samplers": sampler_cases(),
        "model_sampling_continuous_edm": edm_cases(),
    }
    write_json(out_path, data)
    with open(tables_path, "w") as f:
        json.dump(tables(), f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
