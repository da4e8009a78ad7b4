"""The guidance patches (APG, Mahiro, TCFG, FreSca, LatentApplyOperationCFG, DifferentialDiffusion), the
ModelSamplingContinuousEDM options, PerpNegGuider, the table schedulers, the sampler-object nodes and the KSampler
samplers added with them run end to end on the demo SD1 model: each patch changes the image, and every graph gives
the in-process image on one and on two executors (the patches travel as data on the MODEL; APG's momentum and the
CFG++ samplers' history cross processes in the sampler state)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.e2e.test_custom_sampling import custom_prompt
from tests.e2e.test_samplers_on_executors import differing_cases, prompt_for, render_in_process, render_on_server

NEW_SAMPLERS = [
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
# case -> (patch node, its inputs besides the model, extra nodes it reads from)
PATCHES: dict[str, tuple[str, dict, dict]] = {
    "apg": ("APG", {"eta": 0.5, "norm_threshold": 3.0, "momentum": 0.0}, {}),
    "apg_momentum": ("APG", {"eta": 1.0, "norm_threshold": 5.0, "momentum": -0.5}, {}),
    "mahiro": ("Mahiro", {}, {}),
    "tcfg": ("TCFG", {}, {}),
    "fresca": ("FreSca", {"scale_low": 1.0, "scale_high": 1.5, "freq_cutoff": 2}, {}),
    **{
        f"continuous_edm_{sampling}": (
            "ModelSamplingContinuousEDM",
            {"sampling": sampling, "sigma_max": 80.0, "sigma_min": 0.01},
            {},
        )
        for sampling in ("v_prediction", "edm", "edm_playground_v2.5", "eps", "cosmos_rflow")
    },
    "latent_operation_cfg": (
        "LatentApplyOperationCFG",
        {"operation": ["41", 0]},
        {"41": {"class_type": "LatentOperationTonemapReinhard", "inputs": {"multiplier": 0.5}}},
    ),
}
MASKED = {
    "41": {"class_type": "SolidMask", "inputs": {"value": 1.0, "width": 64, "height": 64}},
    "42": {"class_type": "FeatherMask", "inputs": {"mask": ["41", 0], "left": 40, "top": 0, "right": 0, "bottom": 24}},
    "43": {"class_type": "SetLatentNoiseMask", "inputs": {"samples": ["5", 0], "mask": ["42", 0]}},
}


def patched_prompt(case: str | None, masked: bool = False) -> dict:
    prompt = prompt_for("euler", "karras")
    if masked:
        prompt.update(json.loads(json.dumps(MASKED)))
        prompt["3"]["inputs"]["latent_image"] = ["43", 0]
    if case == "differential_diffusion":
        prompt["40"] = {"class_type": "DifferentialDiffusion", "inputs": {"model": ["4", 0], "strength": 0.8}}
        prompt["3"]["inputs"]["model"] = ["40", 0]
    elif case is not None:
        node, inputs, extra = PATCHES[case]
        prompt.update(json.loads(json.dumps(extra)))
        prompt["40"] = {"class_type": node, "inputs": {"model": ["4", 0], **inputs}}
        prompt["3"]["inputs"]["model"] = ["40", 0]
    return prompt


def prompts() -> dict[str, dict]:
    karras = {"scheduler": "karras", "steps": 4, "denoise": 1.0}
    cases = {
        "none": patched_prompt(None),
        "masked": patched_prompt(None, masked=True),
        "differential_diffusion": patched_prompt("differential_diffusion", masked=True),
        **{case: patched_prompt(case) for case in PATCHES},
        **{f"ksampler_{name}": prompt_for(name, "karras") for name in NEW_SAMPLERS},
    }
    cases.update(
        {
            "ays": custom_prompt(
                "KSamplerSelect",
                {"sampler_name": "euler"},
                "AlignYourStepsScheduler",
                {"model_type": "SD1", "steps": 4, "denoise": 1.0},
            ),
            "gits": custom_prompt(
                "KSamplerSelect", {"sampler_name": "euler"}, "GITSScheduler", {"coeff": 1.2, "steps": 4, "denoise": 1.0}
            ),
            "euler_ancestral_cfgpp_node": custom_prompt(
                "SamplerEulerAncestralCFGPP", {"eta": 0.6, "s_noise": 0.9}, "BasicScheduler", karras
            ),
            "euler_cfgpp_alternative": custom_prompt(
                "SamplerEulerCFGpp", {"version": "alternative"}, "BasicScheduler", karras
            ),
            "er_sde_reverse_time": custom_prompt(
                "SamplerER_SDE",
                {"solver_type": "Reverse-time SDE", "max_stage": 2, "eta": 0.5, "s_noise": 1.0},
                "BasicScheduler",
                karras,
            ),
            "sa_solver_node": custom_prompt(
                "SamplerSASolver",
                {
                    "model": ["4", 0],
                    "eta": 0.8,
                    "sde_start_percent": 0.1,
                    "sde_end_percent": 0.7,
                    "s_noise": 1.0,
                    "predictor_order": 2,
                    "corrector_order": 2,
                    "use_pece": True,
                    "simple_order_2": True,
                },
                "BasicScheduler",
                karras,
            ),
            "dpm_adaptive_node": custom_prompt(
                "SamplerDPMAdaptative",
                {
                    "order": 2,
                    "rtol": 0.1,
                    "atol": 0.01,
                    "h_init": 0.1,
                    "pcoeff": 0.0,
                    "icoeff": 1.0,
                    "dcoeff": 0.0,
                    "accept_safety": 0.81,
                    "eta": 0.5,
                    "s_noise": 1.0,
                },
                "BasicScheduler",
                karras,
            ),
            "lcm_upscale_bislerp": custom_prompt(
                "SamplerLCMUpscale",
                {"scale_ratio": 1.5, "scale_steps": 2, "upscale_method": "bislerp"},
                "BasicScheduler",
                karras,
            ),
            "lcm_upscale_bilinear": custom_prompt(
                "SamplerLCMUpscale",
                {"scale_ratio": 1.25, "scale_steps": -1, "upscale_method": "bilinear"},
                "BasicScheduler",
                karras,
            ),
            "er_sde_ode": custom_prompt(
                "SamplerER_SDE",
                {"solver_type": "ODE", "max_stage": 3, "eta": 1.0, "s_noise": 1.0},
                "BasicScheduler",
                karras,
            ),
        }
    )
    for neg_scale in (1.5, 0.0):
        prompt = custom_prompt(
            "KSamplerSelect",
            {"sampler_name": "euler"},
            "BasicScheduler",
            karras,
            guider=(
                "PerpNegGuider",
                {
                    "positive": ["6", 0],
                    "negative": ["7", 0],
                    "empty_conditioning": ["50", 0],
                    "cfg": 6.0,
                    "neg_scale": neg_scale,
                },
            ),
        )
        prompt["50"] = {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": ""}}
        cases[f"perp_neg_{neg_scale}"] = prompt
    for case, prompt in cases.items():
        prompt["9"]["inputs"]["filename_prefix"] = f"guidance_{case}"
    return cases


@pytest.fixture(scope="module")
def in_process_images(demo_workspace) -> dict[str, np.ndarray]:
    return render_in_process(demo_workspace, prompts())


def test_every_patch_changes_the_image(in_process_images):
    same = [case for case in PATCHES if np.array_equal(in_process_images[case], in_process_images["none"])]
    assert not same, f"these patches left the image unchanged: {same}"
    assert not np.array_equal(in_process_images["differential_diffusion"], in_process_images["masked"])
    assert not np.array_equal(in_process_images["perp_neg_1.5"], in_process_images["perp_neg_0.0"])
    assert in_process_images["lcm_upscale_bislerp"].shape[:2] == (96, 96)  # 64 px enlarged 1.5 times


@pytest.mark.parametrize("executors", [1, 2])
def test_guidance_and_new_samplers_on_executors_give_the_in_process_image(serve, in_process_images, executors):
    base = serve("--executors", str(executors), "--executor-threads", "1")
    differing = differing_cases(render_on_server(base, prompts()), in_process_images)
    assert not differing, f"images differ from the in-process run (values differing per case): {differing}"
