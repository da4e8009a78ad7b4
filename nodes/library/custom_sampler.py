"""ComfyUI's custom-sampling family (comfy_extras.nodes_custom_sampler): sampler objects, scheduler nodes
and sigma operations, noise sources, guiders, and the two samplers that put them together.

SAMPLER, NOISE and GUIDER values are plain data (nodes.ksampler's SamplerChoice, NoiseChoice, GuiderChoice)
and SIGMAS a float tensor, so SamplerCustom and SamplerCustomAdvanced run the very loop KSampler runs
(nodes.ksampler.sample_guided): one `denoise_step` invocation per step, on any executor.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from nodes.conditioning import require
from nodes.inputs import require_model
from nodes.ksampler import GuiderChoice, NoiseChoice, SamplerChoice, sample_guided
from nodes.modelfns.model_options import latent_format, sampling_config
from nodes.sampling.model_sampling import ModelSampling, model_sampling_from_config
from nodes.sampling.samplers import SAMPLER_NAMES
from nodes.sampling.schedules import (
    SCHEDULER_NAMES,
    calculate_sigmas,
    exponential,
    karras,
    laplace,
    polyexponential,
    vp,
)
from nodes.sampling.schedules import beta as beta_schedule

MODULE = "comfy_extras.nodes_custom_sampler"
SCHEDULERS_CATEGORY = "sampling/custom_sampling/schedulers"
SIGMAS_CATEGORY = "sampling/custom_sampling/sigmas"
SAMPLERS_CATEGORY = "sampling/custom_sampling/samplers"
GUIDERS_CATEGORY = "sampling/custom_sampling/guiders"
NOISE_CATEGORY = "sampling/custom_sampling/noise"

STEPS = ("INT", {"default": 20, "min": 1, "max": 10000, "tooltip": "The number of sampling steps."})
SIGMA_MAX = (
    "FLOAT",
    {
        "default": 14.614642,
        "min": 0.0,
        "max": 5000.0,
        "step": 0.01,
        "round": False,
        "tooltip": "The highest noise level, where sampling starts.",
    },
)
SIGMA_MIN = (
    "FLOAT",
    {
        "default": 0.0291675,
        "min": 0.0,
        "max": 5000.0,
        "step": 0.01,
        "round": False,
        "tooltip": "The lowest noise level before the final 0.",
    },
)
DENOISE = (
    "FLOAT",
    {
        "default": 1.0,
        "min": 0.0,
        "max": 1.0,
        "step": 0.01,
        "tooltip": "The share of the schedule kept (its low-noise end), for img2img.",
    },
)
ETA = (
    "FLOAT",
    {
        "default": 1.0,
        "min": 0.0,
        "max": 100.0,
        "step": 0.01,
        "round": False,
        "tooltip": "How much fresh noise each step adds (0: deterministic).",
    },
)
S_NOISE = (
    "FLOAT",
    {"default": 1.0, "min": 0.0, "max": 100.0, "step": 0.01, "round": False, "tooltip": "Scale of the added noise."},
)
NOISE_DEVICE = (["gpu", "cpu"], {"tooltip": "Where the Brownian-tree noise is drawn (the results differ)."})
CFG = (
    "FLOAT",
    {
        "default": 8.0,
        "min": 0.0,
        "max": 100.0,
        "step": 0.1,
        "round": 0.01,
        "tooltip": "Classifier-free guidance scale.",
    },
)
SEED = (
    "INT",
    {
        "default": 0,
        "min": 0,
        "max": 0xFFFFFFFFFFFFFFFF,
        "control_after_generate": True,
        "tooltip": "The random seed of the noise.",
    },
)


def _model_sampling(model: Any) -> ModelSampling:
    return model_sampling_from_config(sampling_config(require_model(model)))


def _sigmas(sigmas: Any) -> torch.Tensor:
    if not isinstance(sigmas, torch.Tensor) or sigmas.ndim != 1:
        raise ValueError(f"sigmas: expected SIGMAS (a 1-D tensor), got {type(sigmas).__name__}")
    return sigmas


def _latent(latent: Any, name: str = "latent_image") -> dict:
    samples = latent.get("samples") if isinstance(latent, dict) else None
    # an audio-video latent (ComfyUI's NestedTensor) is a LATENT too: the samplers say which models take it
    if not isinstance(samples, torch.Tensor) and not getattr(samples, "is_nested", False):
        raise ValueError(f"{name}: expected a LATENT")
    return latent


def _of(value: Any, kind: type, name: str, type_name: str) -> Any:
    if not isinstance(value, kind):
        raise ValueError(f"{name}: expected a {type_name}, got {type(value).__name__}")
    return value


class _Node:
    RELATIVE_PYTHON_MODULE = MODULE


# --- schedulers ---------------------------------------------------------------------------------------------


class _Scheduler(_Node):
    RETURN_TYPES = ("SIGMAS",)
    FUNCTION = "get_sigmas"
    CATEGORY = SCHEDULERS_CATEGORY


class BasicScheduler(_Scheduler):
    DESCRIPTION = "The noise levels of one of KSampler's schedulers for the model, cut to the denoised share."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",), "scheduler": (SCHEDULER_NAMES,), "steps": STEPS, "denoise": DENOISE}}

    def get_sigmas(self, model, scheduler, steps, denoise):
        ms = _model_sampling(model)
        total = steps
        if denoise < 1.0:
            if denoise <= 0.0:
                return (torch.FloatTensor([]),)
            total = int(steps / denoise)
        return (calculate_sigmas(ms, scheduler, total).cpu()[-(steps + 1) :],)


class KarrasScheduler(_Scheduler):
    DESCRIPTION = "Karras et al.'s schedule: evenly spaced in sigma^(1/rho), then 0."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "steps": STEPS,
                "sigma_max": SIGMA_MAX,
                "sigma_min": SIGMA_MIN,
                "rho": ("FLOAT", {"default": 7.0, "min": 0.0, "max": 100.0, "step": 0.01, "round": False}),
            }
        }

    def get_sigmas(self, steps, sigma_max, sigma_min, rho):
        return (karras(steps, sigma_min, sigma_max, rho),)


class ExponentialScheduler(_Scheduler):
    DESCRIPTION = "Noise levels evenly spaced in log sigma, then 0."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"steps": STEPS, "sigma_max": SIGMA_MAX, "sigma_min": SIGMA_MIN}}

    def get_sigmas(self, steps, sigma_max, sigma_min):
        return (exponential(steps, sigma_min, sigma_max),)


class PolyexponentialScheduler(_Scheduler):
    DESCRIPTION = "log sigma as a power rho of an even ramp (rho 1: exponential), then 0."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "steps": STEPS,
                "sigma_max": SIGMA_MAX,
                "sigma_min": SIGMA_MIN,
                "rho": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 100.0, "step": 0.01, "round": False}),
            }
        }

    def get_sigmas(self, steps, sigma_max, sigma_min, rho):
        return (polyexponential(steps, sigma_min, sigma_max, rho),)


class LaplaceScheduler(_Scheduler):
    DESCRIPTION = "log sigma at the quantiles of a Laplace distribution, clamped to [sigma_min, sigma_max]."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "steps": STEPS,
                "sigma_max": SIGMA_MAX,
                "sigma_min": SIGMA_MIN,
                "mu": ("FLOAT", {"default": 0.0, "min": -10.0, "max": 10.0, "step": 0.1, "round": False}),
                "beta": ("FLOAT", {"default": 0.5, "min": 0.0, "max": 10.0, "step": 0.1, "round": False}),
            }
        }

    def get_sigmas(self, steps, sigma_max, sigma_min, mu, beta):
        return (laplace(steps, sigma_min, sigma_max, mu, beta),)


class VPScheduler(_Scheduler):
    DESCRIPTION = "The continuous variance-preserving SDE schedule, then 0."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "steps": STEPS,
                "beta_d": ("FLOAT", {"default": 19.9, "min": 0.0, "max": 5000.0, "step": 0.01, "round": False}),
                "beta_min": ("FLOAT", {"default": 0.1, "min": 0.0, "max": 5000.0, "step": 0.01, "round": False}),
                "eps_s": ("FLOAT", {"default": 0.001, "min": 0.0, "max": 1.0, "step": 0.0001, "round": False}),
            }
        }

    def get_sigmas(self, steps, beta_d, beta_min, eps_s):
        return (vp(steps, beta_d, beta_min, eps_s),)


class BetaSamplingScheduler(_Scheduler):
    DESCRIPTION = "The model's noise levels at the quantiles of a Beta(alpha, beta) distribution, then 0."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL",),
                "steps": STEPS,
                "alpha": ("FLOAT", {"default": 0.6, "min": 0.0, "max": 50.0, "step": 0.01, "round": False}),
                "beta": ("FLOAT", {"default": 0.6, "min": 0.0, "max": 50.0, "step": 0.01, "round": False}),
            }
        }

    def get_sigmas(self, model, steps, alpha, beta):
        return (beta_schedule(_model_sampling(model), steps, alpha, beta),)


class SDTurboScheduler(_Scheduler):
    DESCRIPTION = "SD Turbo's schedule: up to 10 of the timesteps 999, 899, ..., 99, starting lower for denoise < 1."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL",),
                "steps": ("INT", {"default": 1, "min": 1, "max": 10}),
                "denoise": ("FLOAT", {"default": 1.0, "min": 0, "max": 1.0, "step": 0.01}),
            }
        }

    def get_sigmas(self, model, steps, denoise):
        start = 10 - int(10 * denoise)
        timesteps = torch.flip(torch.arange(1, 11) * 100 - 1, (0,))[start : start + steps]
        sigmas = _model_sampling(model).sigma(timesteps)
        return (torch.cat([sigmas, sigmas.new_zeros([1])]),)


# --- sigma operations ---------------------------------------------------------------------------------------


class _SigmaOp(_Node):
    CATEGORY = SIGMAS_CATEGORY


class SplitSigmas(_SigmaOp):
    DESCRIPTION = "Splits a schedule at a step: the high part ends with that step's sigma, the low part starts there."
    RETURN_TYPES = ("SIGMAS", "SIGMAS")
    RETURN_NAMES = ("high_sigmas", "low_sigmas")
    FUNCTION = "get_sigmas"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"sigmas": ("SIGMAS",), "step": ("INT", {"default": 0, "min": 0, "max": 10000})}}

    def get_sigmas(self, sigmas, step):
        sigmas = _sigmas(sigmas)
        return (sigmas[: step + 1], sigmas[step:])


class SplitSigmasDenoise(_SigmaOp):
    DESCRIPTION = "Splits a schedule so the low part holds the denoised share of its steps."
    RETURN_TYPES = ("SIGMAS", "SIGMAS")
    RETURN_NAMES = ("high_sigmas", "low_sigmas")
    FUNCTION = "get_sigmas"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"sigmas": ("SIGMAS",), "denoise": DENOISE}}

    def get_sigmas(self, sigmas, denoise):
        sigmas = _sigmas(sigmas)
        low_steps = round(max(sigmas.shape[-1] - 1, 0) * denoise)
        # As ComfyUI slices: at denoise 0 the high part is sigmas[:-0], which is empty.
        return (sigmas[:-low_steps], sigmas[-(low_steps + 1) :])


class FlipSigmas(_SigmaOp):
    DESCRIPTION = "Reverses a schedule (for unsampling); a leading 0 becomes 0.0001."
    RETURN_TYPES = ("SIGMAS",)
    FUNCTION = "get_sigmas"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"sigmas": ("SIGMAS",)}}

    def get_sigmas(self, sigmas):
        sigmas = _sigmas(sigmas)
        if len(sigmas) == 0:
            return (sigmas,)
        sigmas = sigmas.flip(0)
        if sigmas[0] == 0:
            sigmas[0] = 0.0001
        return (sigmas,)


class SetFirstSigma(_SigmaOp):
    DESCRIPTION = "Replaces the first sigma of a schedule."
    RETURN_TYPES = ("SIGMAS",)
    FUNCTION = "set_first_sigma"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "sigmas": ("SIGMAS",),
                "sigma": ("FLOAT", {"default": 136.0, "min": 0.0, "max": 20000.0, "step": 0.001, "round": False}),
            }
        }

    def set_first_sigma(self, sigmas, sigma):
        sigmas = _sigmas(sigmas).clone()
        if len(sigmas) == 0:
            raise ValueError("sigmas: the schedule is empty, it has no first sigma")
        sigmas[0] = sigma
        return (sigmas,)


class ExtendIntermediateSigmas(_SigmaOp):
    DESCRIPTION = (
        "Inserts steps - 1 extra sigmas between neighbours whose upper sigma lies in "
        "[end_at_sigma, start_at_sigma] (start -1: no upper bound), spaced linearly, by cosine or by sine."
    )
    RETURN_TYPES = ("SIGMAS",)
    FUNCTION = "extend"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "sigmas": ("SIGMAS",),
                "steps": ("INT", {"default": 2, "min": 1, "max": 100}),
                "start_at_sigma": (
                    "FLOAT",
                    {"default": -1.0, "min": -1.0, "max": 20000.0, "step": 0.01, "round": False},
                ),
                "end_at_sigma": ("FLOAT", {"default": 12.0, "min": 0.0, "max": 20000.0, "step": 0.01, "round": False}),
                "spacing": (["linear", "cosine", "sine"],),
            }
        }

    def extend(self, sigmas, steps, start_at_sigma, end_at_sigma, spacing):
        sigmas = _sigmas(sigmas)
        upper = float("inf") if start_at_sigma < 0 else start_at_sigma
        ramp = torch.linspace(0, 1, steps + 1, device=sigmas.device)[1:-1]
        fractions = {
            "linear": ramp,
            "cosine": torch.sin(ramp * math.pi / 2),
            "sine": 1 - torch.cos(ramp * math.pi / 2),
        }[spacing]
        out: list = []
        for i in range(len(sigmas) - 1):
            current, following = sigmas[i], sigmas[i + 1]
            out.append(current)
            if end_at_sigma <= current <= upper:
                out.extend((fractions * (following - current) + current).tolist())
        if len(sigmas) > 0:
            out.append(sigmas[-1])
        return (torch.FloatTensor(out),)


class SamplingPercentToSigma(_SigmaOp):
    DESCRIPTION = "The model's sigma at a share of the sampling process (0: start, 1: end)."
    RETURN_TYPES = ("FLOAT",)
    RETURN_NAMES = ("sigma_value",)
    FUNCTION = "get_sigma"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "sampling_percent": ("FLOAT", {"default": 0.0, "min": 0.0, "max": 1.0, "step": 0.0001}),
                "return_actual_sigma": (
                    "BOOLEAN",
                    {
                        "default": False,
                        "tooltip": (
                            "At 0 and 1, give the model's largest and smallest sigma instead of the bounds used to test "
                            "whether a step lies in a range."
                        ),
                    },
                ),
            }
        }

    def get_sigma(self, model, sampling_percent, return_actual_sigma):
        ms = _model_sampling(model)
        value = ms.percent_to_sigma(sampling_percent)
        if return_actual_sigma and sampling_percent == 0.0:
            value = float(ms.sigma_max)
        elif return_actual_sigma and sampling_percent == 1.0:
            value = float(ms.sigma_min)
        return (value,)


# --- sampler objects ----------------------------------------------------------------------------------------


class _SamplerObject(_Node):
    RETURN_TYPES = ("SAMPLER",)
    FUNCTION = "get_sampler"
    CATEGORY = SAMPLERS_CATEGORY


class KSamplerSelect(_SamplerObject):
    DESCRIPTION = "A sampler by name, with its default settings (as KSampler runs it)."

    @classmethod
    def INPUT_TYPES(cls):
        # today's ComfyUI declares it as a V3 combo (0.3.64's plain list form is the same widget)
        options = {"multiselect": False, "options": SAMPLER_NAMES, "tooltip": "The sampling algorithm."}
        return {"required": {"sampler_name": ("COMBO", options)}}

    def get_sampler(self, sampler_name):
        if sampler_name not in SAMPLER_NAMES:
            raise ValueError(f"sampler_name: unknown sampler {sampler_name!r}")
        return (SamplerChoice(sampler_name),)


def _with_device(name: str, noise_device: str) -> str:
    """The *_gpu variant draws its Brownian tree on the model's device, the plain one on the CPU."""
    return name if noise_device == "cpu" else f"{name}_gpu"


class SamplerEulerAncestral(_SamplerObject):
    DESCRIPTION = "Euler ancestral with its noise settings."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"eta": ETA, "s_noise": S_NOISE}}

    def get_sampler(self, eta, s_noise):
        return (SamplerChoice("euler_ancestral", (("eta", eta), ("s_noise", s_noise))),)


class SamplerDPMPP_2S_Ancestral(_SamplerObject):
    DESCRIPTION = "DPM++ 2S ancestral with its noise settings."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"eta": ETA, "s_noise": S_NOISE}}

    def get_sampler(self, eta, s_noise):
        return (SamplerChoice("dpmpp_2s_ancestral", (("eta", eta), ("s_noise", s_noise))),)


class SamplerDPMPP_SDE(_SamplerObject):
    DESCRIPTION = "DPM++ SDE with its noise settings and midpoint ratio r."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "eta": ETA,
                "s_noise": S_NOISE,
                "r": ("FLOAT", {"default": 0.5, "min": 0.0, "max": 100.0, "step": 0.01, "round": False}),
                "noise_device": NOISE_DEVICE,
            }
        }

    def get_sampler(self, eta, s_noise, r, noise_device):
        return (SamplerChoice(_with_device("dpmpp_sde", noise_device), (("eta", eta), ("s_noise", s_noise), ("r", r))),)


class SamplerDPMPP_2M_SDE(_SamplerObject):
    DESCRIPTION = "DPM++ 2M SDE with its solver type and noise settings."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "solver_type": (["midpoint", "heun"],),
                "eta": ETA,
                "s_noise": S_NOISE,
                "noise_device": NOISE_DEVICE,
            }
        }

    def get_sampler(self, solver_type, eta, s_noise, noise_device):
        return (
            SamplerChoice(
                _with_device("dpmpp_2m_sde", noise_device),
                (("eta", eta), ("s_noise", s_noise), ("solver_type", solver_type)),
            ),
        )


class SamplerDPMPP_3M_SDE(_SamplerObject):
    DESCRIPTION = "DPM++ 3M SDE with its noise settings."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"eta": ETA, "s_noise": S_NOISE, "noise_device": NOISE_DEVICE}}

    def get_sampler(self, eta, s_noise, noise_device):
        return (SamplerChoice(_with_device("dpmpp_3m_sde", noise_device), (("eta", eta), ("s_noise", s_noise))),)


class SamplerLMS(_SamplerObject):
    DESCRIPTION = "Linear multistep of a chosen order."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"order": ("INT", {"default": 4, "min": 1, "max": 100})}}

    def get_sampler(self, order):
        return (SamplerChoice("lms", (("order", order),)),)


# --- noise --------------------------------------------------------------------------------------------------


class DisableNoise(_Node):
    DESCRIPTION = "No initial noise: the latent is sampled as it is."
    RETURN_TYPES = ("NOISE",)
    FUNCTION = "get_noise"
    CATEGORY = NOISE_CATEGORY

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def get_noise(self):
        return (NoiseChoice(0, enabled=False),)


class RandomNoise(DisableNoise):
    DESCRIPTION = "Initial noise from a seed (the same noise KSampler draws for that seed)."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"noise_seed": SEED}}

    def get_noise(self, noise_seed):
        return (NoiseChoice(noise_seed),)


class AddNoise(_Node):
    DESCRIPTION = "Noises a latent to the level of a schedule's span (its first minus its last sigma)."
    RETURN_TYPES = ("LATENT",)
    FUNCTION = "add_noise"
    CATEGORY = "_for_testing/custom_sampling/noise"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"model": ("MODEL",), "noise": ("NOISE",), "sigmas": ("SIGMAS",), "latent_image": ("LATENT",)}
        }

    def add_noise(self, model, noise, sigmas, latent_image):
        model, sigmas, latent = require_model(model), _sigmas(sigmas), _latent(latent_image)
        noise = _of(noise, NoiseChoice, "noise", "NOISE")
        if len(sigmas) == 0:
            return (latent,)
        samples = latent["samples"]
        if getattr(samples, "is_nested", False):
            raise ValueError("latent_image: AddNoise does not take audio-video latents yet")
        drawn = noise.generate(latent, samples)
        ms, fmt = _model_sampling(model), latent_format(model)
        scale = torch.abs(sigmas[0] - sigmas[-1]) if len(sigmas) > 1 else sigmas[0]
        if torch.count_nonzero(samples) > 0:  # an empty latent is not shifted into model space
            samples = fmt.process_in(samples)
        noisy = fmt.process_out(ms.noise_scaling(scale, drawn, samples))
        return ({**latent, "samples": torch.nan_to_num(noisy, nan=0.0, posinf=0.0, neginf=0.0)},)


# --- guiders ------------------------------------------------------------------------------------------------


class _Guider(_Node):
    RETURN_TYPES = ("GUIDER",)
    FUNCTION = "get_guider"
    CATEGORY = GUIDERS_CATEGORY


class BasicGuider(_Guider):
    DESCRIPTION = "Guidance by one conditioning alone (no negative, cfg 1)."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",), "conditioning": ("CONDITIONING",)}}

    def get_guider(self, model, conditioning):
        return (GuiderChoice(require_model(model), require(conditioning, "conditioning"), []),)


class CFGGuider(_Guider):
    DESCRIPTION = "Classifier-free guidance of positive over negative (KSampler's guidance)."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"model": ("MODEL",), "positive": ("CONDITIONING",), "negative": ("CONDITIONING",), "cfg": CFG}
        }

    def get_guider(self, model, positive, negative, cfg):
        return (GuiderChoice(require_model(model), require(positive, "positive"), require(negative, "negative"), cfg),)


class DualCFGGuider(_Guider):
    DESCRIPTION = (
        "Two guidance scales: cond1 over cond2 (cfg_conds) and cond2 over negative "
        "(cfg_cond2_negative), added (regular) or applied one inside the other (nested)."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL",),
                "cond1": ("CONDITIONING",),
                "cond2": ("CONDITIONING",),
                "negative": ("CONDITIONING",),
                "cfg_conds": CFG,
                "cfg_cond2_negative": CFG,
                "style": (["regular", "nested"],),
            }
        }

    def get_guider(self, model, cond1, cond2, negative, cfg_conds, cfg_cond2_negative, style):
        return (
            GuiderChoice(
                require_model(model),
                require(cond1, "cond1"),
                require(negative, "negative"),
                cfg_conds,
                kind="dual",
                middle=require(cond2, "cond2"),
                cfg2=cfg_cond2_negative,
                nested=style == "nested",
            ),
        )


# --- samplers -----------------------------------------------------------------------------------------------


class SamplerCustom(_Node):
    DESCRIPTION = "Samples a latent with a sampler object and a schedule, guided by positive over negative."
    RETURN_TYPES = ("LATENT", "LATENT")
    RETURN_NAMES = ("output", "denoised_output")
    OUTPUT_TOOLTIPS = ("The sampled latent.", "The last step's prediction of the clean latent.")
    FUNCTION = "sample"
    CATEGORY = "sampling/custom_sampling"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL",),
                "add_noise": ("BOOLEAN", {"default": True}),
                "noise_seed": SEED,
                "cfg": CFG,
                "positive": ("CONDITIONING",),
                "negative": ("CONDITIONING",),
                "sampler": ("SAMPLER",),
                "sigmas": ("SIGMAS",),
                "latent_image": ("LATENT",),
            }
        }

    async def sample(self, model, add_noise, noise_seed, cfg, positive, negative, sampler, sigmas, latent_image):
        guider = GuiderChoice(require_model(model), require(positive, "positive"), require(negative, "negative"), cfg)
        # Without added noise the seed still seeds the samplers' per-step noise, as in ComfyUI.
        return await sample_guided(
            guider,
            _of(sampler, SamplerChoice, "sampler", "SAMPLER"),
            _sigmas(sigmas),
            _latent(latent_image),
            NoiseChoice(noise_seed, bool(add_noise)),
        )


class SamplerCustomAdvanced(_Node):
    DESCRIPTION = "Samples a latent from a noise source, a guider, a sampler object and a schedule."
    RETURN_TYPES = ("LATENT", "LATENT")
    RETURN_NAMES = ("output", "denoised_output")
    OUTPUT_TOOLTIPS = ("The sampled latent.", "The last step's prediction of the clean latent.")
    FUNCTION = "sample"
    CATEGORY = "sampling/custom_sampling"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "noise": ("NOISE",),
                "guider": ("GUIDER",),
                "sampler": ("SAMPLER",),
                "sigmas": ("SIGMAS",),
                "latent_image": ("LATENT",),
            }
        }

    async def sample(self, noise, guider, sampler, sigmas, latent_image):
        return await sample_guided(
            _of(guider, GuiderChoice, "guider", "GUIDER"),
            _of(sampler, SamplerChoice, "sampler", "SAMPLER"),
            _sigmas(sigmas),
            _latent(latent_image),
            _of(noise, NoiseChoice, "noise", "NOISE"),
        )


NODE_CLASS_MAPPINGS = {
    cls.__name__: cls
    for cls in (
        SamplerCustom,
        BasicScheduler,
        KarrasScheduler,
        ExponentialScheduler,
        PolyexponentialScheduler,
        LaplaceScheduler,
        VPScheduler,
        BetaSamplingScheduler,
        SDTurboScheduler,
        KSamplerSelect,
        SamplerEulerAncestral,
        SamplerLMS,
        SamplerDPMPP_3M_SDE,
        SamplerDPMPP_2M_SDE,
        SamplerDPMPP_SDE,
        SamplerDPMPP_2S_Ancestral,
        SplitSigmas,
        SplitSigmasDenoise,
        FlipSigmas,
        SetFirstSigma,
        ExtendIntermediateSigmas,
        SamplingPercentToSigma,
        CFGGuider,
        DualCFGGuider,
        BasicGuider,
        RandomNoise,
        DisableNoise,
        AddNoise,
        SamplerCustomAdvanced,
    )
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
