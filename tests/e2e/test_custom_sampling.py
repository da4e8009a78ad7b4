"""The custom-sampling nodes run KSampler's loop: SamplerCustomAdvanced (noise + guider + sampler object +
scheduler node) and SamplerCustom give KSampler's latent bit for bit with the same settings, the
sampler-object nodes' options reach the step functions, and the custom graphs give the in-process image
on one and on two executors (one `denoise_step` invocation per step, wherever it runs).

Four steps at 64 px on the demo SD1 model at one torch thread. dpm_2, dpm_2_ancestral, uni_pc and
uni_pc_bh2 are left out of the KSampler comparison: KSampler computes their schedule for one step more
and drops its second-to-last sigma, which no scheduler node does (ComfyUI behaves the same)."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
import torch

from nodes.sampling.samplers import SAMPLER_NAMES
from nodes.sampling.schedules import DISCARD_PENULTIMATE_SIGMA_SAMPLERS, SCHEDULER_NAMES
from tests.e2e.test_samplers_on_executors import BASE_PROMPT, differing_cases, render_in_process, render_on_server
from tests.float_tolerance import float32_ulp

SEED, STEPS, CFG = 11, 4, 7.0

# (case, KSampler's sampler_name, sampler-object node, its inputs)
SAMPLER_OBJECTS = [
    (f"select_{s}", s, "KSamplerSelect", {"sampler_name": s})
    for s in SAMPLER_NAMES
    if s not in DISCARD_PENULTIMATE_SIGMA_SAMPLERS
] + [
    ("euler_ancestral_node", "euler_ancestral", "SamplerEulerAncestral", {"eta": 1.0, "s_noise": 1.0}),
    ("dpmpp_2s_ancestral_node", "dpmpp_2s_ancestral", "SamplerDPMPP_2S_Ancestral", {"eta": 1.0, "s_noise": 1.0}),
    ("dpmpp_sde_cpu", "dpmpp_sde", "SamplerDPMPP_SDE", {"eta": 1.0, "s_noise": 1.0, "r": 0.5, "noise_device": "cpu"}),
    (
        "dpmpp_sde_gpu",
        "dpmpp_sde_gpu",
        "SamplerDPMPP_SDE",
        {"eta": 1.0, "s_noise": 1.0, "r": 0.5, "noise_device": "gpu"},
    ),
    (
        "dpmpp_2m_sde_midpoint",
        "dpmpp_2m_sde",
        "SamplerDPMPP_2M_SDE",
        {"solver_type": "midpoint", "eta": 1.0, "s_noise": 1.0, "noise_device": "cpu"},
    ),
    (
        "dpmpp_2m_sde_heun_gpu",
        "dpmpp_2m_sde_heun_gpu",
        "SamplerDPMPP_2M_SDE",
        {"solver_type": "heun", "eta": 1.0, "s_noise": 1.0, "noise_device": "gpu"},
    ),
    ("dpmpp_3m_sde_cpu", "dpmpp_3m_sde", "SamplerDPMPP_3M_SDE", {"eta": 1.0, "s_noise": 1.0, "noise_device": "cpu"}),
    ("lms_node", "lms", "SamplerLMS", {"order": 4}),
    ("er_sde_node", "er_sde", "SamplerER_SDE", {"solver_type": "ER-SDE", "max_stage": 3, "eta": 1.0, "s_noise": 1.0}),
    (
        "euler_ancestral_cfg_pp_node",
        "euler_ancestral_cfg_pp",
        "SamplerEulerAncestralCFGPP",
        {"eta": 1.0, "s_noise": 1.0},
    ),
    ("euler_cfg_pp_node", "euler_cfg_pp", "SamplerEulerCFGpp", {"version": "regular"}),
    (
        "dpm_adaptive_node",
        "dpm_adaptive",
        "SamplerDPMAdaptative",
        {
            "order": 3,
            "rtol": 0.05,
            "atol": 0.0078,
            "h_init": 0.05,
            "pcoeff": 0.0,
            "icoeff": 1.0,
            "dcoeff": 0.0,
            "accept_safety": 0.81,
            "eta": 0.0,
            "s_noise": 1.0,
        },
    ),
    (
        "sa_solver_node",
        "sa_solver",
        "SamplerSASolver",
        {
            "eta": 1.0,
            "sde_start_percent": 0.2,
            "sde_end_percent": 0.8,
            "s_noise": 1.0,
            "predictor_order": 3,
            "corrector_order": 4,
            "use_pece": False,
            "simple_order_2": False,
        },
    ),
    (
        "sa_solver_pece_node",
        "sa_solver_pece",
        "SamplerSASolver",
        {
            "eta": 1.0,
            "sde_start_percent": 0.2,
            "sde_end_percent": 0.8,
            "s_noise": 1.0,
            "predictor_order": 3,
            "corrector_order": 4,
            "use_pece": True,
            "simple_order_2": False,
        },
    ),
]
# sampler nodes that take the MODEL (its sigma range places their stochastic interval)
MODEL_SAMPLERS = {"SamplerSASolver"}
# Options away from the defaults must change the result (they reach the step functions).
CHANGED_OPTIONS = [
    ("euler_ancestral", "SamplerEulerAncestral", {"eta": 0.5, "s_noise": 1.0}),
    ("euler_ancestral", "SamplerEulerAncestral", {"eta": 1.0, "s_noise": 0.5}),
    ("dpmpp_2s_ancestral", "SamplerDPMPP_2S_Ancestral", {"eta": 0.3, "s_noise": 1.0}),
    ("dpmpp_sde", "SamplerDPMPP_SDE", {"eta": 1.0, "s_noise": 1.0, "r": 0.3, "noise_device": "cpu"}),
    ("dpmpp_2m_sde", "SamplerDPMPP_2M_SDE", {"solver_type": "heun", "eta": 1.0, "s_noise": 1.0, "noise_device": "cpu"}),
    (
        "dpmpp_2m_sde",
        "SamplerDPMPP_2M_SDE",
        {"solver_type": "midpoint", "eta": 0.0, "s_noise": 1.0, "noise_device": "cpu"},
    ),
    ("dpmpp_3m_sde", "SamplerDPMPP_3M_SDE", {"eta": 0.5, "s_noise": 1.0, "noise_device": "cpu"}),
    ("lms", "SamplerLMS", {"order": 2}),
]


def _sd1_range() -> tuple[float, float]:
    from nodes import arch
    from nodes.sampling.model_sampling import model_sampling_from_config

    ms = model_sampling_from_config(arch.sampling_config("sd1"))
    return float(ms.sigma_min), float(ms.sigma_max)


def _scheduler_nodes() -> list[tuple[str, str, str, dict]]:
    """(case, KSampler's scheduler, scheduler node, its inputs without the model)."""
    sigma_min, sigma_max = _sd1_range()
    return [
        (f"basic_{s}", s, "BasicScheduler", {"scheduler": s, "steps": STEPS, "denoise": 1.0}) for s in SCHEDULER_NAMES
    ] + [
        (
            "karras_node",
            "karras",
            "KarrasScheduler",
            {"steps": STEPS, "sigma_max": sigma_max, "sigma_min": sigma_min, "rho": 7.0},
        ),
        (
            "exponential_node",
            "exponential",
            "ExponentialScheduler",
            {"steps": STEPS, "sigma_max": sigma_max, "sigma_min": sigma_min},
        ),
        ("beta_node", "beta", "BetaSamplingScheduler", {"steps": STEPS, "alpha": 0.6, "beta": 0.6}),
    ]


MODEL_SCHEDULERS = {"BasicScheduler", "BetaSamplingScheduler", "SDTurboScheduler"}


@pytest.fixture(scope="module")
def parts(demo_workspace):
    from nodes.latent import EmptyLatentImage
    from nodes.loaders import CheckpointLoaderSimple
    from nodes.model_nodes import CLIPTextEncode

    async def go():
        model, clip, _ = CheckpointLoaderSimple().load_checkpoint("sd1-tiny.safetensors")
        (pos,) = await CLIPTextEncode().encode(clip, "a bottle")
        (neg,) = await CLIPTextEncode().encode(clip, "text")
        (latent,) = EmptyLatentImage().generate(64, 64, 1)
        return model, pos, neg, latent

    return asyncio.run(go())


def _node(class_type: str):
    import nodes

    return nodes.NODE_CLASS_MAPPINGS[class_type]()


def _call(class_type: str, **inputs):
    node = _node(class_type)
    out = getattr(node, node.FUNCTION)(**inputs)
    return asyncio.run(out) if asyncio.iscoroutine(out) else out


def ksampler(parts, sampler_name: str, scheduler: str, cfg: float = CFG, denoise: float = 1.0) -> torch.Tensor:
    model, pos, neg, latent = parts
    (out,) = _call(
        "KSampler",
        model=model,
        seed=SEED,
        steps=STEPS,
        cfg=cfg,
        sampler_name=sampler_name,
        scheduler=scheduler,
        positive=pos,
        negative=neg,
        latent_image=latent,
        denoise=denoise,
    )
    return out["samples"]


def custom_advanced(
    parts, sampler_node: str, sampler_inputs: dict, scheduler_node: str, scheduler_inputs: dict, guider=None
) -> torch.Tensor:
    model, pos, neg, latent = parts
    (sampler,) = _call(sampler_node, **sampler_inputs, **({"model": model} if sampler_node in MODEL_SAMPLERS else {}))
    extra = {"model": model} if scheduler_node in MODEL_SCHEDULERS else {}
    (sigmas,) = _call(scheduler_node, **scheduler_inputs, **extra)
    (noise,) = _call("RandomNoise", noise_seed=SEED)
    if guider is None:
        (guider,) = _call("CFGGuider", model=model, positive=pos, negative=neg, cfg=CFG)
    out, _ = _call(
        "SamplerCustomAdvanced", noise=noise, guider=guider, sampler=sampler, sigmas=sigmas, latent_image=latent
    )
    return out["samples"]


def _bit_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.equal(a, b)


def test_sampler_objects_equal_ksampler(parts, fixed_threads):
    differing = [
        case
        for case, name, node, inputs in SAMPLER_OBJECTS
        if not _bit_equal(
            custom_advanced(
                parts, node, inputs, "BasicScheduler", {"scheduler": "karras", "steps": STEPS, "denoise": 1.0}
            ),
            ksampler(parts, name, "karras"),
        )
    ]
    assert not differing, f"SamplerCustomAdvanced differs from KSampler: {differing}"


def test_scheduler_nodes_equal_ksampler(parts, fixed_threads):
    differing = [
        case
        for case, scheduler, node, inputs in _scheduler_nodes()
        if not _bit_equal(
            custom_advanced(parts, "KSamplerSelect", {"sampler_name": "euler_ancestral"}, node, inputs),
            ksampler(parts, "euler_ancestral", scheduler),
        )
    ]
    assert not differing, f"SamplerCustomAdvanced differs from KSampler: {differing}"


def test_denoise_and_basic_guider_equal_ksampler(parts, fixed_threads):
    model, pos, _, _ = parts
    partial = custom_advanced(
        parts,
        "KSamplerSelect",
        {"sampler_name": "euler"},
        "BasicScheduler",
        {"scheduler": "normal", "steps": STEPS, "denoise": 0.6},
    )
    assert _bit_equal(partial, ksampler(parts, "euler", "normal", denoise=0.6))
    (basic,) = _call("BasicGuider", model=model, conditioning=pos)
    guided = custom_advanced(
        parts,
        "KSamplerSelect",
        {"sampler_name": "euler"},
        "BasicScheduler",
        {"scheduler": "karras", "steps": STEPS, "denoise": 1.0},
        guider=basic,
    )
    assert _bit_equal(guided, ksampler(parts, "euler", "karras", cfg=1.0))  # cfg 1 evaluates the positive alone


def test_sampler_options_reach_the_step_functions(parts, fixed_threads):
    karras = {"scheduler": "karras", "steps": STEPS, "denoise": 1.0}
    unchanged = [
        (name, node, inputs)
        for name, node, inputs in CHANGED_OPTIONS
        if _bit_equal(custom_advanced(parts, node, inputs, "BasicScheduler", karras), ksampler(parts, name, "karras"))
    ]
    assert not unchanged, f"options without effect: {unchanged}"


def test_sampler_custom_equals_ksampler_and_advanced(parts, fixed_threads):
    model, pos, neg, latent = parts
    (sampler,) = _call("KSamplerSelect", sampler_name="dpmpp_2m_sde")
    (sigmas,) = _call("BasicScheduler", model=model, scheduler="karras", steps=STEPS, denoise=1.0)
    out, denoised = _call(
        "SamplerCustom",
        model=model,
        add_noise=True,
        noise_seed=SEED,
        cfg=CFG,
        positive=pos,
        negative=neg,
        sampler=sampler,
        sigmas=sigmas,
        latent_image=latent,
    )
    assert _bit_equal(out["samples"], ksampler(parts, "dpmpp_2m_sde", "karras"))
    assert torch.equal(denoised["samples"], out["samples"])  # its last step (to sigma 0) returns x0
    high, _ = _call("SplitSigmas", sigmas=sigmas, step=2)
    noisy, x0 = _call(
        "SamplerCustom",
        model=model,
        add_noise=True,
        noise_seed=SEED,
        cfg=CFG,
        positive=pos,
        negative=neg,
        sampler=sampler,
        sigmas=high,
        latent_image=latent,
    )
    assert (noisy["samples"] - x0["samples"]).abs().max() > 0.1  # stopped early: x still carries noise
    # add_noise off: KSamplerAdvanced with its noise disabled (the seed still drives the SDE noise)
    quiet, _ = _call(
        "SamplerCustom",
        model=model,
        add_noise=False,
        noise_seed=SEED,
        cfg=CFG,
        positive=pos,
        negative=neg,
        sampler=sampler,
        sigmas=sigmas,
        latent_image=latent,
    )
    (adv,) = _call(
        "KSamplerAdvanced",
        model=model,
        add_noise="disable",
        noise_seed=SEED,
        steps=STEPS,
        cfg=CFG,
        sampler_name="dpmpp_2m_sde",
        scheduler="karras",
        positive=pos,
        negative=neg,
        latent_image=latent,
        start_at_step=0,
        end_at_step=10000,
        return_with_leftover_noise="disable",
    )
    assert _bit_equal(quiet["samples"], adv["samples"])


def test_empty_sigmas_return_the_latent(parts):
    model, pos, neg, latent = parts
    (sampler,) = _call("KSamplerSelect", sampler_name="euler")
    out, denoised = _call(
        "SamplerCustom",
        model=model,
        add_noise=True,
        noise_seed=SEED,
        cfg=CFG,
        positive=pos,
        negative=neg,
        sampler=sampler,
        sigmas=torch.FloatTensor([]),
        latent_image=latent,
    )
    assert torch.equal(out["samples"], latent["samples"]) and denoised is out


# --- the same graphs through the engine, in-process and on executors ----------------------------------------


def custom_prompt(
    sampler_node: str,
    sampler_inputs: dict,
    scheduler_node: str,
    scheduler_inputs: dict,
    guider: tuple[str, dict] | None = None,
    sigma_ops: list[tuple[str, dict]] = (),
) -> dict:
    """The text-to-image graph with node 3 a SamplerCustomAdvanced fed by node-built noise, guider, sampler
    and sigmas (optionally passed through sigma operations, each taking the previous node's first output)."""
    prompt = json.loads(json.dumps(BASE_PROMPT))
    prompt["5"]["inputs"].update(width=64, height=64)
    model = ["4", 0]
    prompt["20"] = {"class_type": "RandomNoise", "inputs": {"noise_seed": SEED}}
    kind, inputs = guider or ("CFGGuider", {"positive": ["6", 0], "negative": ["7", 0], "cfg": CFG})
    prompt["21"] = {"class_type": kind, "inputs": {"model": model, **inputs}}
    prompt["22"] = {
        "class_type": sampler_node,
        "inputs": {**sampler_inputs, **({"model": model} if sampler_node in MODEL_SAMPLERS else {})},
    }
    extra = {"model": model} if scheduler_node in MODEL_SCHEDULERS else {}
    prompt["23"] = {"class_type": scheduler_node, "inputs": {**scheduler_inputs, **extra}}
    sigmas = ["23", 0]
    for k, (op, op_inputs) in enumerate(sigma_ops):
        prompt[str(30 + k)] = {"class_type": op, "inputs": {"sigmas": sigmas, **op_inputs}}
        sigmas = [str(30 + k), 0]
    prompt["3"] = {
        "class_type": "SamplerCustomAdvanced",
        "inputs": {
            "noise": ["20", 0],
            "guider": ["21", 0],
            "sampler": ["22", 0],
            "sigmas": sigmas,
            "latent_image": ["5", 0],
        },
    }
    return prompt


def _engine_cases() -> dict[str, dict]:
    karras = {"scheduler": "karras", "steps": STEPS, "denoise": 1.0}
    cases = {case: custom_prompt(node, inputs, "BasicScheduler", karras) for case, _, node, inputs in SAMPLER_OBJECTS}
    sigma_min, sigma_max = _sd1_range()
    span = {"steps": STEPS, "sigma_max": sigma_max, "sigma_min": sigma_min}
    ancestral = ("KSamplerSelect", {"sampler_name": "euler_ancestral"})
    cases.update(
        {
            "align_your_steps": custom_prompt(
                *ancestral, "AlignYourStepsScheduler", {"model_type": "SD1", "steps": STEPS, "denoise": 1.0}
            ),
            "gits": custom_prompt(*ancestral, "GITSScheduler", {"coeff": 1.2, "steps": STEPS, "denoise": 1.0}),
            "optimal_steps": custom_prompt(
                *ancestral, "OptimalStepsScheduler", {"model_type": "FLUX", "steps": STEPS, "denoise": 1.0}
            ),
            "polyexponential": custom_prompt(*ancestral, "PolyexponentialScheduler", {**span, "rho": 1.5}),
            "laplace": custom_prompt(*ancestral, "LaplaceScheduler", {**span, "mu": 0.0, "beta": 0.5}),
            "vp": custom_prompt(
                *ancestral, "VPScheduler", {"steps": STEPS, "beta_d": 19.9, "beta_min": 0.1, "eps_s": 0.001}
            ),
            "sd_turbo": custom_prompt(*ancestral, "SDTurboScheduler", {"steps": 2, "denoise": 1.0}),
            "split_extend": custom_prompt(
                *ancestral,
                "BasicScheduler",
                {**karras, "steps": 6},
                sigma_ops=[
                    ("SplitSigmas", {"step": 2}),
                    (
                        "ExtendIntermediateSigmas",
                        {"steps": 2, "start_at_sigma": -1.0, "end_at_sigma": 0.5, "spacing": "cosine"},
                    ),
                ],
            ),
            "dual_cfg_regular": custom_prompt(
                *ancestral,
                "BasicScheduler",
                karras,
                guider=(
                    "DualCFGGuider",
                    {
                        "cond1": ["6", 0],
                        "cond2": ["7", 0],
                        "negative": ["7", 0],
                        "cfg_conds": 5.0,
                        "cfg_cond2_negative": 2.0,
                        "style": "regular",
                    },
                ),
            ),
            "dual_cfg_nested": custom_prompt(
                *ancestral,
                "BasicScheduler",
                karras,
                guider=(
                    "DualCFGGuider",
                    {
                        "cond1": ["6", 0],
                        "cond2": ["7", 0],
                        "negative": ["7", 0],
                        "cfg_conds": 5.0,
                        "cfg_cond2_negative": 2.0,
                        "style": "nested",
                    },
                ),
            ),
        }
    )
    # Today's guiders and patches whose settings travel to the executors in each step's params: the negative
    # pass on a second MODEL (a LoRA'd one), and a cfg override with NAG on the MODEL.
    both = {"positive": ["6", 0], "negative": ["7", 0]}
    cases["dual_model"] = custom_prompt(
        *ancestral,
        "BasicScheduler",
        karras,
        guider=("DualModelGuider", {**both, "model_negative": ["40", 0], "cfg": 4.0}),
    )
    cases["dual_model"]["40"] = {
        "class_type": "LoraLoaderModelOnly",
        "inputs": {"model": ["4", 0], "lora_name": "sd1-tiny-lora.safetensors", "strength_model": 1.0},
    }
    cases["cfg_override_nag"] = custom_prompt(
        *ancestral, "BasicScheduler", karras, guider=("CFGGuider", {**both, "model": ["42", 0], "cfg": CFG})
    )
    cases["cfg_override_nag"]["41"] = {
        "class_type": "CFGOverride",
        "inputs": {"model": ["4", 0], "cfg": 2.0, "start_percent": 0.0, "end_percent": 0.5},
    }
    cases["cfg_override_nag"]["42"] = {
        "class_type": "NAGuidance",
        "inputs": {"model": ["41", 0], "nag_scale": 5.0, "nag_alpha": 0.5, "nag_tau": 1.5},
    }
    for case, prompt in cases.items():
        prompt["9"]["inputs"]["filename_prefix"] = f"custom_{case}"
    return cases


@pytest.fixture(scope="module")
def in_process_images(demo_workspace) -> dict[str, np.ndarray]:
    return render_in_process(demo_workspace, _engine_cases())


@pytest.mark.parametrize("executors", [1, 2])
def test_custom_sampling_on_executors_gives_the_in_process_image(serve, in_process_images, executors):
    base = serve("--executors", str(executors), "--executor-threads", "1")
    differing = differing_cases(render_on_server(base, _engine_cases()), in_process_images)
    assert not differing, f"images differ from the in-process run (values differing per case): {differing}"


def _numbers(values) -> list[float]:
    """The numbers of a (nested) list, in order."""
    return [x for v in values for x in _numbers(v)] if isinstance(values, list) else [float(values)]


def _layout(values):
    """A (nested) list's lengths: where a split falls, with the numbers left out."""
    return [_layout(v) for v in values] if isinstance(values, list) else None


def test_schedules_and_sigma_ops_match_comfyui():
    """The model-free schedule and sigma-operation numbers equal ComfyUI's own within float32 rounding (recorded by
    running its functions; SIGMAS has no output a recorded prompt could show)."""
    from pathlib import Path

    from nodes.library.custom_sampler import ExtendIntermediateSigmas, FlipSigmas, SplitSigmasDenoise
    from nodes.sampling.schedules import exponential, karras, laplace, polyexponential, vp

    ref = json.loads((Path(__file__).parent / "comfyui_sigma_schedules.json").read_text())["values"]
    ours: dict[str, list] = {}
    for steps in (1, 4, 9):
        ours[f"karras{steps}"] = karras(steps, 0.03, 14.6, 5.0).tolist()
        ours[f"exp{steps}"] = exponential(steps, 0.03, 14.6).tolist()
        ours[f"poly{steps}"] = polyexponential(steps, 0.03, 14.6, 1.7).tolist()
        ours[f"vp{steps}"] = vp(steps, 19.9, 0.1, 0.001).tolist()
        ours[f"laplace{steps}"] = laplace(steps, 0.03, 14.6, 0.3, 0.7).tolist()
    s = karras(6, 0.03, 14.6)
    for spacing in ("linear", "cosine", "sine"):
        ours[f"extend_{spacing}"] = ExtendIntermediateSigmas().extend(s, 3, -1.0, 1.0, spacing)[0].tolist()
    for d in (0.0, 0.3, 0.5, 1.0):
        ours[f"ssd{d}"] = [t.tolist() for t in SplitSigmasDenoise().get_sigmas(s, d)]
    ours["flip"] = FlipSigmas().get_sigmas(s.clone())[0].tolist()
    # Each value within 4 float32 ulps of itself, not equal: the recording was made on another CPU, and exp/log round
    # differently by an ulp between machines (on an AVX-512 CPU vp4's last sigma came out 0.010485992766916752 against
    # the recorded 0.010485993698239326, 1 ulp).
    assert sorted(ours) == sorted(ref)
    for name, values in ours.items():
        assert _layout(values) == _layout(ref[name]), name
        flat, recorded = _numbers(values), _numbers(ref[name])
        for a, b in zip(flat, recorded, strict=True):
            assert abs(a - b) <= 4 * float32_ulp(max(abs(a), abs(b))), (name, a, b)
