"""Record what ComfyUI's comfy.conds, comfy.float, comfy.model_sampling / model_base.model_sampling,
comfy_extras.nodes_model_advanced's LCM sampling, model_base.Timestep, comfy.model_detection helpers and
supported_models class attributes compute or hold, as the fixture of tests/packs/test_surface_model_base.py, test_surface_conds.py and test_surface_float.py.
Inputs are built from torch.arange / linspace (no random draws), so the tests rebuild them.

Run inside ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here):

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_model_surface.py /work/main/tests/packs/fixtures/comfyui_model_surface.json
"""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu

out_path = sys.argv[1]
comfyui_on_cpu()
import comfy.conds  # noqa: E402
import comfy.float  # noqa: E402
import comfy.model_base  # noqa: E402
import comfy.model_detection  # noqa: E402
import comfy.model_sampling  # noqa: E402
import comfy.supported_models  # noqa: E402

COMFYUI = "0.3.64 (a125cd84b054a57729b5eecab930ca9408719832)"


def ramp(*shape: int, scale: float = 0.37, shift: float = 0.0) -> torch.Tensor:
    """The deterministic input tensors (the tests build the same)."""
    n = 1
    for s in shape:
        n *= s
    return torch.sin(torch.arange(n, dtype=torch.float32) * scale + shift).reshape(shape)


def conds_cases() -> dict:
    c = comfy.conds
    a, b = ramp(1, 4, 6, 5), ramp(1, 4, 6, 5, shift=1.0)
    noise = c.CONDNoiseShape(ramp(1, 4, 8, 8))
    x77, x154, x385 = ramp(1, 77, 8), ramp(1, 154, 8, shift=0.5), ramp(1, 385, 8)
    lst = c.CONDList([ramp(1, 3, 2), ramp(2, 5)])
    return {
        "regular_process": b64(c.CONDRegular(a).process_cond(3).cond),
        "regular_process_narrow": b64(c.CONDRegular(ramp(4, 2)).process_cond(3).cond),
        "regular_concat": b64(c.CONDRegular(a).concat([c.CONDRegular(b), c.CONDRegular(a)])),
        "regular_can_concat": [
            c.CONDRegular(a).can_concat(c.CONDRegular(b)),
            c.CONDRegular(a).can_concat(c.CONDRegular(ramp(1, 4, 6, 6))),
        ],
        "regular_size": c.CONDRegular(a).size(),
        "noise_area": b64(noise.process_cond(2, area=(4, 3, 2, 1)).cond),
        "noise_no_area": b64(noise.process_cond(2, area=None).cond),
        "crossattn_can_concat": [
            c.CONDCrossAttn(x77).can_concat(c.CONDCrossAttn(x154)),
            c.CONDCrossAttn(x77).can_concat(c.CONDCrossAttn(x385)),
            c.CONDCrossAttn(x77).can_concat(c.CONDCrossAttn(ramp(1, 77, 9))),
            c.CONDCrossAttn(x77).can_concat(c.CONDCrossAttn(ramp(2, 154, 8))),
        ],
        "crossattn_concat": b64(c.CONDCrossAttn(x77).concat([c.CONDCrossAttn(x154)])),
        "constant": [
            c.CONDConstant(3).process_cond(5).cond,
            c.CONDConstant(3).can_concat(c.CONDConstant(3)),
            c.CONDConstant(3).can_concat(c.CONDConstant(4)),
            c.CONDConstant("x").concat([]),
            c.CONDConstant(3).size(),
        ],
        "list_process": [b64(t) for t in lst.process_cond(3).cond],
        "list_concat": [b64(t) for t in lst.concat([c.CONDList([ramp(1, 3, 2, shift=2.0), ramp(2, 5, shift=2.0)])])],
        "list_can_concat": [
            lst.can_concat(c.CONDList([ramp(1, 3, 2), ramp(2, 5)])),
            lst.can_concat(c.CONDList([ramp(1, 3, 2)])),
            lst.can_concat(c.CONDList([ramp(1, 3, 2), ramp(2, 6)])),
        ],
        "list_size": [int(v) for v in c.CONDList([ramp(1, 3, 2), ramp(2, 5), ramp(1, 4, 7)]).size()],
    }


def float_cases() -> dict:
    value = ramp(37, 19, scale=0.731) * torch.linspace(0.001, 500.0, 37 * 19).reshape(37, 19)
    out = {}
    for name in ("float8_e4m3fn", "float8_e5m2"):
        for seed in (0, 1234):
            out[f"{name}/{seed}"] = b64(comfy.float.stochastic_rounding(value, getattr(torch, name), seed=seed).float())
    out["bfloat16"] = b64(comfy.float.stochastic_rounding(value, torch.bfloat16).float())
    return out


SAMPLING = [  # (ModelType name, sampling_settings)
    ("EPS", {}),
    ("EPS", {"zsnr": True}),
    ("V_PREDICTION", {"linear_end": 0.018, "beta_schedule": "linear"}),
    ("EPS", {"beta_schedule": "sqrt_linear", "linear_start": 0.0001, "linear_end": 0.02}),
    ("V_PREDICTION_EDM", {"sigma_max": 80.0, "sigma_min": 0.002, "sigma_data": 0.5}),
    ("EDM", {"sigma_data": 0.5, "sigma_max": 80.0, "sigma_min": 0.002}),
    ("FLOW", {"shift": 3.0}),
    ("FLOW", {"shift": 1.73, "multiplier": 1.0}),
    ("FLUX", {"shift": 1.15}),
    ("FLUX", {}),
    ("STABLE_CASCADE", {"shift": 2.0}),
    ("V_PREDICTION_CONTINUOUS", {"sigma_min": 0.03, "sigma_max": 500.0}),
    ("IMG_TO_IMG", {}),
    ("FLOW_COSMOS", {"sigma_data": 1.0, "sigma_max": 80.0, "sigma_min": 0.002}),
]


def sampling_cases() -> list:
    cases = []
    x, out = ramp(2, 4, 3, 3), ramp(2, 4, 3, 3, shift=0.7)
    for type_name, settings in SAMPLING:
        config = type("Config", (), {"sampling_settings": dict(settings)})()
        ms = comfy.model_base.model_sampling(config, getattr(comfy.model_base.ModelType, type_name))
        sigma = torch.stack([ms.sigmas[len(ms.sigmas) // 3], ms.sigmas[-2]]).float()
        cases.append(
            {
                "type": type_name,
                "settings": settings,
                "n": len(ms.sigmas),
                "sigmas": b64(ms.sigmas[:: max(1, len(ms.sigmas) // 50)]),  # about 50 points of the table
                "sigma_min": float(ms.sigma_min),
                "sigma_max": float(ms.sigma_max),
                "timestep": b64(ms.timestep(sigma).float()),
                # one at a time: ModelSamplingCosmosRFlow.sigma takes a single timestep
                "sigma": b64(torch.stack([torch.as_tensor(ms.sigma(t)).float() for t in ms.timestep(sigma)])),
                "percent": [float(ms.percent_to_sigma(p)) for p in (0.0, 0.25, 0.6, 1.0)],
                "input": b64(ms.calculate_input(sigma, x)),
                "denoised": b64(ms.calculate_denoised(sigma, out, x)),
                "noise": b64(ms.noise_scaling(sigma, out, x.clone(), max_denoise=False)),
                "noise_max": b64(ms.noise_scaling(sigma, out, x.clone(), max_denoise=True)),
                "inverse": b64(ms.inverse_noise_scaling(sigma * 0.5, x)),
            }
        )
    return cases


def lcm_cases() -> list:
    """comfy_extras.nodes_model_advanced's LCM on the distilled table, as AnimateDiff-Evolved builds it."""
    import comfy_extras.nodes_model_advanced as adv

    cases = []
    x, out = ramp(2, 4, 3, 3), ramp(2, 4, 3, 3, shift=0.7)
    for original, zsnr in ((50, False), (100, False), (25, True)):
        base = type("Distilled", (adv.ModelSamplingDiscreteDistilled,), {"original_timesteps": original})
        ms = type("Advanced", (base, adv.LCM), {})(None, zsnr=zsnr)
        sigma = torch.stack([ms.sigmas[len(ms.sigmas) // 3], ms.sigmas[-2]]).float()
        cases.append(
            {
                "original_timesteps": original,
                "zsnr": zsnr,
                "sigmas": b64(ms.sigmas),
                "timestep": b64(ms.timestep(sigma).float()),
                "sigma": b64(ms.sigma(ms.timestep(sigma) + 0.5)),
                "denoised": b64(ms.calculate_denoised(sigma, out, x)),
            }
        )
    return cases


def supported_cases() -> dict:
    out = {}
    for cls in comfy.supported_models.models:
        out[cls.__name__] = {
            "unet_config": repr(cls.unet_config),
            "unet_extra_config": repr(cls.unet_extra_config),
            "sampling_settings": repr(cls.sampling_settings),
            "latent_format": cls.latent_format.__name__,
            "memory_usage_factor": cls.memory_usage_factor,
            "noise_aug_config": repr(cls.noise_aug_config),
            "bases": [b.__name__ for b in cls.__bases__],
        }
    return {"order": [c.__name__ for c in comfy.supported_models.models], "classes": out}


def detection_cases() -> dict:
    keys = [f"model.diffusion_model.input_blocks.{i}.0.weight" for i in range(12)] + ["first_stage_model.x"]
    yaml_cfg = {
        "num_res_blocks": 2,
        "channel_mult": [1, 2, 4, 4],
        "attention_resolutions": [4, 2, 1],
        "transformer_depth": 1,
        "model_channels": 320,
    }
    return {
        "count_blocks": comfy.model_detection.count_blocks(keys, "model.diffusion_model.input_blocks.{}."),
        "prefix": [
            comfy.model_detection.unet_prefix_from_state_dict(dict.fromkeys(keys)),
            comfy.model_detection.unet_prefix_from_state_dict(dict.fromkeys(keys[:4])),
            comfy.model_detection.unet_prefix_from_state_dict({f"net.b{i}": 0 for i in range(8)}),
        ],
        "convert_config": repr(comfy.model_detection.convert_config(yaml_cfg)),
        "convert_config_middle": repr(
            comfy.model_detection.convert_config(
                {
                    "num_res_blocks": [1, 2],
                    "channel_mult": [1, 2],
                    "attention_resolutions": [2],
                    "transformer_depth": [3, 5],
                    "transformer_depth_middle": 7,
                }
            )
        ),
        "sdxl_config": type(
            comfy.model_detection.model_config_from_unet_config(
                dict(comfy.supported_models.SDXL.unet_config, in_channels=4)
            )
        ).__name__,
    }


def main() -> None:
    fixture = {
        "comfyui": COMFYUI,
        "model_type": {m.name: m.value for m in comfy.model_base.ModelType},
        "timestep_embedding": b64(comfy.model_base.Timestep(256)(torch.tensor([1024.0, 0.0, 37.5]))),
        "timestep_embedding_odd": b64(comfy.model_base.Timestep(7)(torch.tensor([3.0]))),
        "conds": conds_cases(),
        "float": float_cases(),
        "sampling": sampling_cases(),
        "lcm": lcm_cases(),
        "supported_models": supported_cases(),
        "detection": detection_cases(),
    }
    with open(out_path, "w") as f:
        json.dump(fixture, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
