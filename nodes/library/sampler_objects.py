"""Sampler-object nodes beyond nodes.library.custom_sampler's: ComfyUI's SamplerEulerAncestralCFGPP and
SamplerER_SDE (comfy_extras.nodes_custom_sampler) and SamplerEulerCFGpp (comfy_extras.nodes_advanced_samplers).

Each returns a SAMPLER value (nodes.ksampler.SamplerChoice: a sampler name of nodes.sampling.samplers with
settings for its step function), so SamplerCustom(Advanced) runs it one denoise_step invocation per step.
"""
from __future__ import annotations

from nodes.ksampler import SamplerChoice

CUSTOM_SAMPLER = "comfy_extras.nodes_custom_sampler"
SAMPLERS_CATEGORY = "sampling/custom_sampling/samplers"


def _float(default: float, maximum: float, tooltip: str) -> tuple:
    return ("FLOAT", {"default": default, "min": 0.0, "max": maximum, "step": 0.01, "round": False,
                      "tooltip": tooltip})


class _SamplerObject:
    RETURN_TYPES = ("SAMPLER",)
    FUNCTION = "get_sampler"


class SamplerEulerAncestralCFGPP(_SamplerObject):
    RELATIVE_PYTHON_MODULE = CUSTOM_SAMPLER
    CATEGORY = SAMPLERS_CATEGORY
    DESCRIPTION = "Euler ancestral CFG++ (steps along the negative prediction) with its noise settings."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"eta": _float(1.0, 1.0, "How much fresh noise each step adds (0: deterministic)."),
                             "s_noise": _float(1.0, 10.0, "Scale of the added noise.")}}

    def get_sampler(self, eta: float, s_noise: float) -> tuple[SamplerChoice]:
        return (SamplerChoice("euler_ancestral_cfg_pp", (("eta", float(eta)), ("s_noise", float(s_noise)))),)


class SamplerER_SDE(_SamplerObject):
    RELATIVE_PYTHON_MODULE = CUSTOM_SAMPLER
    CATEGORY = SAMPLERS_CATEGORY
    DESCRIPTION = ("The extended reverse-time SDE solver: ER-SDE's noise scaler, the reverse-time SDE's "
                   "(lambda^(eta + 1)) or the deterministic ODE, with up to three stages.")
    SOLVER_TYPES = ["ER-SDE", "Reverse-time SDE", "ODE"]

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "solver_type": ("COMBO", {"options": cls.SOLVER_TYPES}),
            "max_stage": ("INT", {"default": 3, "min": 1, "max": 3,
                                  "tooltip": "The solver's highest stage (order of the multistep correction)."}),
            "eta": _float(1.0, 100.0, "The reverse-time SDE's stochasticity (ignored by ER-SDE and the ODE)."),
            "s_noise": _float(1.0, 100.0, "Scale of the added noise.")}}

    def get_sampler(self, solver_type: str, max_stage: int, eta: float, s_noise: float) -> tuple[SamplerChoice]:
        if solver_type not in self.SOLVER_TYPES:
            raise ValueError(f"solver_type: unknown value {solver_type!r}")
        if solver_type == "ODE" or (solver_type == "Reverse-time SDE" and eta == 0):
            eta, s_noise = 0.0, 0.0
        # None: ER-SDE's own noise scaler; a number: the reverse-time SDE's lambda^(eta + 1).
        scaler_eta = None if solver_type == "ER-SDE" else float(eta)
        return (SamplerChoice("er_sde", (("s_noise", float(s_noise)), ("max_stage", int(max_stage)),
                                         ("scaler_eta", scaler_eta))),)


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


NODE_CLASS_MAPPINGS = {cls.__name__: cls for cls in (SamplerEulerAncestralCFGPP, SamplerER_SDE, SamplerEulerCFGpp)}
NODE_DISPLAY_NAME_MAPPINGS = {"SamplerEulerAncestralCFGPP": "SamplerEulerAncestralCFG++",
                              "SamplerEulerCFGpp": "SamplerEulerCFG++"}
