"""Sampler-object nodes beyond nodes.library.custom_sampler's: ComfyUI's SamplerDPMAdaptative,
SamplerEulerAncestralCFGPP, SamplerER_SDE, SamplerSASolver and SamplerSEEDS2 (comfy_extras.nodes_custom_sampler), SamplerEulerCFGpp,
SamplerLCMUpscale and today's SamplerLCM (comfy_extras.nodes_advanced_samplers).

Each returns a SAMPLER value (nodes.ksampler.SamplerChoice: a sampler name of nodes.sampling.samplers with
settings for its step function), so SamplerCustom(Advanced) runs it one denoise_step invocation per step.
"""

from __future__ import annotations

from typing import Any

from nodes.inputs import require_model
from nodes.ksampler import SamplerChoice
from nodes.modelfns.model_options import sampling_config
from nodes.sampling.model_sampling import model_sampling_from_config

CUSTOM_SAMPLER = "comfy_extras.nodes_custom_sampler"
SAMPLERS_CATEGORY = "sampling/custom_sampling/samplers"


def _float(default: float, maximum: float, tooltip: str) -> tuple:
    return ("FLOAT", {"default": default, "min": 0.0, "max": maximum, "step": 0.01, "round": False, "tooltip": tooltip})


class _SamplerObject:
    RETURN_TYPES = ("SAMPLER",)
    FUNCTION = "get_sampler"


class SamplerDPMAdaptative(_SamplerObject):
    RELATIVE_PYTHON_MODULE = CUSTOM_SAMPLER
    CATEGORY = SAMPLERS_CATEGORY
    DESCRIPTION = (
        "DPM-Solver with adaptive step sizes: an embedded lower-order solution estimates each step's "
        "error and a PID controller sizes the next step; the schedule gives only its two ends."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "order": ("INT", {"default": 3, "min": 2, "max": 3, "tooltip": "The solver's order (2 or 3)."}),
                "rtol": _float(0.05, 100.0, "Relative error tolerance."),
                "atol": _float(0.0078, 100.0, "Absolute error tolerance."),
                "h_init": _float(0.05, 100.0, "The first step size, in log sigma."),
                "pcoeff": _float(0.0, 100.0, "Proportional gain of the step-size controller."),
                "icoeff": _float(1.0, 100.0, "Integral gain of the step-size controller."),
                "dcoeff": _float(0.0, 100.0, "Derivative gain of the step-size controller."),
                "accept_safety": _float(0.81, 100.0, "The smallest step-size factor at which a step is accepted."),
                "eta": _float(0.0, 100.0, "How much fresh noise each accepted step adds (0: deterministic)."),
                "s_noise": _float(1.0, 100.0, "Scale of the added noise."),
            }
        }

    def get_sampler(
        self,
        order: int,
        rtol: float,
        atol: float,
        h_init: float,
        pcoeff: float,
        icoeff: float,
        dcoeff: float,
        accept_safety: float,
        eta: float,
        s_noise: float,
    ) -> tuple[SamplerChoice]:
        settings = {
            "order": int(order),
            "rtol": rtol,
            "atol": atol,
            "h_init": h_init,
            "pcoeff": pcoeff,
            "icoeff": icoeff,
            "dcoeff": dcoeff,
            "accept_safety": accept_safety,
            "eta": eta,
            "s_noise": s_noise,
        }
        return (
            SamplerChoice("dpm_adaptive", tuple((k, v if k == "order" else float(v)) for k, v in settings.items())),
        )


class SamplerEulerAncestralCFGPP(_SamplerObject):
    RELATIVE_PYTHON_MODULE = CUSTOM_SAMPLER
    CATEGORY = SAMPLERS_CATEGORY
    DESCRIPTION = "Euler ancestral CFG++ (steps along the negative prediction) with its noise settings."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "eta": _float(1.0, 1.0, "How much fresh noise each step adds (0: deterministic)."),
                "s_noise": _float(1.0, 10.0, "Scale of the added noise."),
            }
        }

    def get_sampler(self, eta: float, s_noise: float) -> tuple[SamplerChoice]:
        return (SamplerChoice("euler_ancestral_cfg_pp", (("eta", float(eta)), ("s_noise", float(s_noise)))),)


class SamplerER_SDE(_SamplerObject):
    RELATIVE_PYTHON_MODULE = CUSTOM_SAMPLER
    CATEGORY = SAMPLERS_CATEGORY
    DESCRIPTION = (
        "The extended reverse-time SDE solver: ER-SDE's noise scaler, the reverse-time SDE's "
        "(lambda^(eta + 1)) or the deterministic ODE, with up to three stages."
    )
    SOLVER_TYPES = ["ER-SDE", "Reverse-time SDE", "ODE"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "solver_type": ("COMBO", {"options": cls.SOLVER_TYPES}),
                "max_stage": (
                    "INT",
                    {
                        "default": 3,
                        "min": 1,
                        "max": 3,
                        "tooltip": "The solver's highest stage (order of the multistep correction).",
                    },
                ),
                "eta": _float(1.0, 100.0, "The reverse-time SDE's stochasticity (ignored by ER-SDE and the ODE)."),
                "s_noise": _float(1.0, 100.0, "Scale of the added noise."),
            }
        }

    def get_sampler(self, solver_type: str, max_stage: int, eta: float, s_noise: float) -> tuple[SamplerChoice]:
        if solver_type not in self.SOLVER_TYPES:
            raise ValueError(f"solver_type: unknown value {solver_type!r}")
        if solver_type == "ODE" or (solver_type == "Reverse-time SDE" and eta == 0):
            eta, s_noise = 0.0, 0.0
        # None: ER-SDE's own noise scaler; a number: the reverse-time SDE's lambda^(eta + 1).
        scaler_eta = None if solver_type == "ER-SDE" else float(eta)
        return (
            SamplerChoice(
                "er_sde", (("s_noise", float(s_noise)), ("max_stage", int(max_stage)), ("scaler_eta", scaler_eta))
            ),
        )


class SamplerSEEDS2(_SamplerObject):
    RELATIVE_PYTHON_MODULE = CUSTOM_SAMPLER
    CATEGORY = SAMPLERS_CATEGORY
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = (
        "SEEDS-2 with its settings: phi_1 / r 0.5 / eta 1 is seeds_2 itself; phi_2 with r 1 is the "
        "exponential Heun x0 solver (eta 0) or its SDE form (eta 1)."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "solver_type": ("COMBO", {"multiselect": False, "options": ["phi_1", "phi_2"]}),
                "eta": _float(1.0, 100.0, "How stochastic each step is (0: deterministic)."),
                "s_noise": _float(1.0, 100.0, "Scale of the added noise."),
                "r": (
                    "FLOAT",
                    {
                        "default": 0.5,
                        "min": 0.01,
                        "max": 1.0,
                        "step": 0.01,
                        "round": False,
                        "tooltip": "Where the intermediate evaluation lies within each step (0-1).",
                    },
                ),
            }
        }

    def get_sampler(self, solver_type: str, eta: float, s_noise: float, r: float) -> tuple[SamplerChoice]:
        if solver_type not in ("phi_1", "phi_2"):
            raise ValueError(f"solver_type: {solver_type!r} is not phi_1 or phi_2")
        if not 0 < r <= 1:
            raise ValueError(f"r: {r} is outside (0, 1]")
        return (
            SamplerChoice(
                "seeds_2", (("eta", float(eta)), ("s_noise", float(s_noise)), ("r", float(r)), ("phi", solver_type))
            ),
        )


class SamplerSASolver(_SamplerObject):
    RELATIVE_PYTHON_MODULE = CUSTOM_SAMPLER
    CATEGORY = SAMPLERS_CATEGORY
    DESCRIPTION = (
        "SA-Solver, a stochastic Adams predictor-corrector: noise is injected with strength eta "
        "between two points of the schedule."
    )

    @classmethod
    def INPUT_TYPES(cls):
        def percent(default: float, tooltip: str) -> tuple:
            return ("FLOAT", {"default": default, "min": 0.0, "max": 1.0, "step": 0.001, "tooltip": tooltip})

        return {
            "required": {
                "model": ("MODEL", {}),
                "eta": (
                    "FLOAT",
                    {
                        "default": 1.0,
                        "min": 0.0,
                        "max": 10.0,
                        "step": 0.01,
                        "round": False,
                        "tooltip": "Stochastic strength inside the interval (0: an ODE solver).",
                    },
                ),
                "sde_start_percent": percent(0.2, "Where the stochastic interval starts (share of the schedule)."),
                "sde_end_percent": percent(0.8, "Where the stochastic interval ends (share of the schedule)."),
                "s_noise": _float(1.0, 100.0, "Scale of the added noise."),
                "predictor_order": (
                    "INT",
                    {"default": 3, "min": 1, "max": 6, "tooltip": "How many past predictions the predictor uses."},
                ),
                "corrector_order": (
                    "INT",
                    {"default": 4, "min": 0, "max": 6, "tooltip": "How many predictions the corrector uses (0: none)."},
                ),
                "use_pece": ("BOOLEAN", {"tooltip": "Evaluate the model again on the corrected state (PECE)."}),
                "simple_order_2": ("BOOLEAN", {"tooltip": "Use the simplified order-2 coefficients."}),
            }
        }

    def get_sampler(
        self,
        model: Any,
        eta: float,
        sde_start_percent: float,
        sde_end_percent: float,
        s_noise: float,
        predictor_order: int,
        corrector_order: int,
        use_pece: bool,
        simple_order_2: bool,
    ) -> tuple[SamplerChoice]:
        require_model(model)
        ms = model_sampling_from_config(sampling_config(model))
        tau = (float(eta), ms.percent_to_sigma(sde_start_percent), ms.percent_to_sigma(sde_end_percent))
        return (
            SamplerChoice(
                "sa_solver_pece" if use_pece else "sa_solver",
                (
                    ("tau", tau),
                    ("s_noise", float(s_noise)),
                    ("predictor_order", int(predictor_order)),
                    ("corrector_order", int(corrector_order)),
                    ("simple_order_2", bool(simple_order_2)),
                ),
            ),
        )


class SamplerEulerCFGpp(_SamplerObject):
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_advanced_samplers"
    CATEGORY = "_for_testing"
    EXPERIMENTAL = True
    DESCRIPTION = "Euler CFG++: the regular version (KSampler's euler_cfg_pp) or the alternative formulation."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"version": ("COMBO", {"multiselect": False, "options": ["regular", "alternative"]})}}

    def get_sampler(self, version: str) -> tuple[SamplerChoice]:
        if version not in ("regular", "alternative"):
            raise ValueError(f"version: unknown value {version!r}")
        return (SamplerChoice("euler_cfg_pp_alternative" if version == "alternative" else "euler_cfg_pp"),)


class SamplerLCMUpscale(_SamplerObject):
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_advanced_samplers"
    CATEGORY = SAMPLERS_CATEGORY
    DESCRIPTION = (
        "LCM sampling that enlarges the latent step by step over its first steps, up to scale_ratio times its size."
    )
    UPSCALE_METHODS = ["bislerp", "nearest-exact", "bilinear", "area", "bicubic"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "scale_ratio": (
                    "FLOAT",
                    {
                        "default": 1.0,
                        "min": 0.1,
                        "max": 20.0,
                        "step": 0.01,
                        "tooltip": "The final size as a multiple of the starting one.",
                    },
                ),
                "scale_steps": (
                    "INT",
                    {
                        "default": -1,
                        "min": -1,
                        "max": 1000,
                        "step": 1,
                        "tooltip": "Over how many steps to enlarge (-1: the first half).",
                    },
                ),
                "upscale_method": ("COMBO", {"multiselect": False, "options": cls.UPSCALE_METHODS}),
            }
        }

    def get_sampler(self, scale_ratio: float, scale_steps: int, upscale_method: str) -> tuple[SamplerChoice]:
        if upscale_method not in self.UPSCALE_METHODS:
            raise ValueError(f"upscale_method: unknown value {upscale_method!r}")
        return (
            SamplerChoice(
                "lcm_upscale",
                (
                    ("total_upscale", float(scale_ratio)),
                    ("upscale_method", upscale_method),
                    ("upscale_steps", None if scale_steps < 0 else int(scale_steps)),
                ),
            ),
        )


class SamplerLCM(_SamplerObject):
    """Today's ComfyUI (newer than 0.10.0; HiDream-O1 templates use it): LCM whose re-noising is scaled by
    s_noise at the first step moving linearly to s_noise_end at the last, optionally clamped first."""

    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_advanced_samplers"
    CATEGORY = "model/sampling/samplers"
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = "LCM with per-step noise you can tune: s_noise multiplies the noise the model was trained with."

    @classmethod
    def INPUT_TYPES(cls):
        def scale(default: float, maximum: float, tooltip: str) -> tuple:
            return ("FLOAT", {"default": default, "min": 0.0, "max": maximum, "step": 0.01, "tooltip": tooltip})

        return {
            "required": {
                "s_noise": scale(1.0, 64.0, "Noise multiplier at the first step (1: as trained)."),
                "s_noise_end": scale(1.0, 64.0, "Noise multiplier at the last step (equal to s_noise: constant)."),
                "noise_clip_std": scale(0.0, 10.0, "Clamp each step's noise to +/- this many of its std (0: off)."),
            }
        }

    def get_sampler(self, s_noise: float, s_noise_end: float, noise_clip_std: float) -> tuple[SamplerChoice]:
        for name, value in (("s_noise", s_noise), ("s_noise_end", s_noise_end), ("noise_clip_std", noise_clip_std)):
            if value < 0:
                raise ValueError(f"SamplerLCM: {name} must not be negative, got {value}")
        options = (
            ("s_noise", float(s_noise)),
            ("s_noise_end", float(s_noise_end)),
            ("noise_clip_std", float(noise_clip_std)),
        )
        return (SamplerChoice("lcm", options),)


NODE_CLASS_MAPPINGS = {
    cls.__name__: cls
    for cls in (
        SamplerDPMAdaptative,
        SamplerEulerAncestralCFGPP,
        SamplerER_SDE,
        SamplerSASolver,
        SamplerSEEDS2,
        SamplerEulerCFGpp,
        SamplerLCMUpscale,
        SamplerLCM,
    )
}
NODE_DISPLAY_NAME_MAPPINGS = {
    "SamplerEulerAncestralCFGPP": "SamplerEulerAncestralCFG++",
    "SamplerEulerCFGpp": "SamplerEulerCFG++",
}
