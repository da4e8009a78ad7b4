"""`comfy.model_sampling`: ComfyUI's sampling classes, in ComfyUI's shape: a schedule class (an nn.Module
holding the `sigmas` / `log_sigmas` buffers, built from a model config's `sampling_settings`) combined with
a parameterisation mixin (EPS, V_PREDICTION, CONST, ...), as packs do with
`class ModelSamplingAdvanced(ModelSamplingDiscrete, EPS)`. The maths is ours (nodes.sampling.model_sampling,
checked against ComfyUI's numbers); these classes only give it ComfyUI's names and signatures."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from nodes.sampling import model_sampling as ours
from nodes.sampling.model_sampling import flux_time_shift, time_snr_shift

rescale_zero_terminal_snr_sigmas = ours.rescale_zero_terminal_snr


def reshape_sigma(sigma: Tensor, noise_dim: int) -> Tensor:
    """sigma shaped to broadcast over a [B, ...] tensor of noise_dim dimensions."""
    if sigma.nelement() == 1:
        return sigma.view(())
    return sigma.view(sigma.shape[:1] + (1,) * (noise_dim - 1))


def _settings(model_config: Any) -> dict:
    return dict(getattr(model_config, "sampling_settings", None) or {}) if model_config is not None else {}


# --- parameterisations (mixins: they read self.sigma_data from the schedule) --------------------------------


class _Parameterisation:
    """The four methods every parameterisation has: our ModelSampling's, delegating to one of our
    parameterisations (self.param) with the schedule's sigma_data."""

    param: Any = None
    calculate_input = ours.ModelSampling.calculate_input
    calculate_denoised = ours.ModelSampling.calculate_denoised
    noise_scaling = ours.ModelSampling.noise_scaling
    inverse_noise_scaling = ours.ModelSampling.inverse_noise_scaling


class EPS(_Parameterisation):
    param = ours.Eps()


class V_PREDICTION(EPS):
    param = ours.VPrediction()


class EDM(V_PREDICTION):
    param = ours.Edm()


class CONST(_Parameterisation):
    param = ours.Const()


class X0(EPS):
    param = ours.X0()


class IMG_TO_IMG(X0):
    param = ours.ImgToImg()


class COSMOS_RFLOW(_Parameterisation):
    param = ours.CosmosRFlow()


# --- schedules --------------------------------------------------------------------------------------------


class _Schedule(torch.nn.Module):
    """The sigmas buffer's ends as sigma_min / sigma_max (our ModelSampling's properties)."""

    sigma_data = 1.0
    sigma_min = ours.ModelSampling.sigma_min
    sigma_max = ours.ModelSampling.sigma_max


class ModelSamplingDiscrete(_Schedule):
    """DDPM timesteps (SD1/SD2/SDXL): sampling_settings beta_schedule, linear_start, linear_end, timesteps,
    zsnr."""

    def __init__(self, model_config: Any = None, zsnr: bool | None = None) -> None:
        super().__init__()
        s = _settings(model_config)
        self._register_schedule(
            given_betas=None,
            beta_schedule=s.get("beta_schedule", "linear"),
            timesteps=s.get("timesteps", 1000),
            linear_start=s.get("linear_start", 0.00085),
            linear_end=s.get("linear_end", 0.012),
            cosine_s=8e-3,
            zsnr=s.get("zsnr", False) if zsnr is None else zsnr,
        )
        self.sigma_data = 1.0

    def _register_schedule(
        self,
        given_betas: Tensor | None = None,
        beta_schedule: str = "linear",
        timesteps: int = 1000,
        linear_start: float = 1e-4,
        linear_end: float = 2e-2,
        cosine_s: float = 8e-3,
        zsnr: bool = False,
    ) -> None:
        betas = (
            given_betas
            if given_betas is not None
            else ours.make_betas(beta_schedule, timesteps, linear_start, linear_end, cosine_s)
        )
        betas = torch.as_tensor(betas, dtype=torch.float64)
        alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
        self.num_timesteps = int(betas.shape[0])
        self.linear_start, self.linear_end, self.zsnr = linear_start, linear_end, zsnr
        sigmas = ((1 - alphas_cumprod) / alphas_cumprod) ** 0.5
        if zsnr:
            sigmas = rescale_zero_terminal_snr_sigmas(sigmas)
        self.set_sigmas(sigmas)

    def set_sigmas(self, sigmas: Tensor) -> None:
        self.register_buffer("sigmas", sigmas.float())
        self.register_buffer("log_sigmas", sigmas.log().float())

    timestep = ours.DiscreteSampling.timestep
    sigma = ours.DiscreteSampling.sigma
    percent_to_sigma = ours.DiscreteSampling.percent_to_sigma


class ModelSamplingDiscreteEDM(ModelSamplingDiscrete):
    timestep = ours.ContinuousEDMSampling.timestep
    sigma = ours.ContinuousEDMSampling.sigma


class ModelSamplingContinuousEDM(_Schedule):
    """1000 log-spaced sigmas between sampling_settings sigma_min and sigma_max; timestep = log(sigma) / 4."""

    def __init__(self, model_config: Any = None) -> None:
        super().__init__()
        s = _settings(model_config)
        self.set_parameters(s.get("sigma_min", 0.002), s.get("sigma_max", 120.0), s.get("sigma_data", 1.0))

    def set_parameters(self, sigma_min: float, sigma_max: float, sigma_data: float) -> None:
        self.sigma_data = sigma_data
        sigmas = torch.linspace(math.log(sigma_min), math.log(sigma_max), 1000).exp()
        self.register_buffer("sigmas", sigmas)
        self.register_buffer("log_sigmas", sigmas.log())

    timestep = ours.ContinuousEDMSampling.timestep
    sigma = ours.ContinuousEDMSampling.sigma
    percent_to_sigma = ours.ContinuousEDMSampling.percent_to_sigma


class ModelSamplingContinuousV(ModelSamplingContinuousEDM):
    timestep = ours.ContinuousVSampling.timestep
    sigma = ours.ContinuousVSampling.sigma


class ModelSamplingCosmosRFlow(ModelSamplingContinuousEDM):
    timestep = ours.CosmosRFlowSampling.timestep
    sigma = ours.CosmosRFlowSampling.sigma


class ModelSamplingDiscreteFlow(_Schedule):
    """SD3 / AuraFlow: sampling_settings shift and multiplier."""

    def __init__(self, model_config: Any = None) -> None:
        super().__init__()
        s = _settings(model_config)
        self.set_parameters(shift=s.get("shift", 1.0), multiplier=s.get("multiplier", 1000))

    def set_parameters(self, shift: float = 1.0, timesteps: int = 1000, multiplier: float = 1000) -> None:
        self.shift, self.multiplier = shift, multiplier
        self.register_buffer("sigmas", self.sigma((torch.arange(1, timesteps + 1, 1) / timesteps) * multiplier))

    timestep = ours.FlowSampling.timestep
    sigma = ours.FlowSampling.sigma
    percent_to_sigma = ours.FlowSampling.percent_to_sigma


class ModelSamplingFlux(_Schedule):
    """Flux: sampling_settings shift (1.15 by default), 10000 points."""

    def __init__(self, model_config: Any = None) -> None:
        super().__init__()
        self.set_parameters(shift=_settings(model_config).get("shift", 1.15))

    def set_parameters(self, shift: float = 1.15, timesteps: int = 10000) -> None:
        self.shift = shift
        self.register_buffer("sigmas", self.sigma(torch.arange(1, timesteps + 1, 1) / timesteps))

    timestep = ours.FluxSampling.timestep
    sigma = ours.FluxSampling.sigma
    percent_to_sigma = ours.FluxSampling.percent_to_sigma


class StableCascadeSampling(ModelSamplingDiscrete):
    """Stable Cascade's cosine schedule with sampling_settings shift."""

    def __init__(self, model_config: Any = None) -> None:
        _Schedule.__init__(self)
        self.sigma_data = 1.0
        self.set_parameters(_settings(model_config).get("shift", 1.0))

    def set_parameters(self, shift: float = 1.0, cosine_s: float = 8e-3) -> None:
        table = ours.StableCascadeSampling(ours.Eps(), shift=shift, cosine_s=cosine_s)
        self.shift, self.cosine_s = shift, table.cosine_s
        self.init_alpha_cumprod = table.init_alpha_cumprod
        self.num_timesteps = table.num_timesteps
        self.set_sigmas(table.sigmas)

    sigma = ours.StableCascadeSampling.sigma
    timestep = ours.StableCascadeSampling.timestep
    percent_to_sigma = ours.StableCascadeSampling.percent_to_sigma


__all__ = [
    "EPS",
    "V_PREDICTION",
    "EDM",
    "CONST",
    "X0",
    "IMG_TO_IMG",
    "COSMOS_RFLOW",
    "ModelSamplingDiscrete",
    "ModelSamplingDiscreteEDM",
    "ModelSamplingContinuousEDM",
    "ModelSamplingContinuousV",
    "ModelSamplingCosmosRFlow",
    "ModelSamplingDiscreteFlow",
    "ModelSamplingFlux",
    "StableCascadeSampling",
    "rescale_zero_terminal_snr_sigmas",
    "reshape_sigma",
    "time_snr_shift",
    "flux_time_shift",
]
