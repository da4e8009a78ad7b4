"""How a model family maps noise levels (sigma) to its timestep input and its output to a denoised latent.

Numbers follow ComfyUI's `comfy.model_sampling` so that schedules and samplers built on top give the same
sigmas: float32 tables, the same interpolation in log-sigma, the same flow/Flux time shifts.

A `ModelSampling` is two independent choices:
- the schedule (sigma <-> timestep): discrete DDPM betas, discrete flow (SD3), Flux;
- the parameterisation (how model output and noise combine): eps, v-prediction, or CONST (rectified flow).
"""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor


def _per_sample(sigma: Tensor, ndim: int) -> Tensor:
    """Shape sigma to broadcast against a [B, ...] tensor: a scalar stays scalar, [B] becomes [B, 1, ...]."""
    if sigma.nelement() == 1:
        return sigma.view(())
    return sigma.view(sigma.shape[:1] + (1,) * (ndim - 1))


# --- parameterisations -------------------------------------------------------------------------------------

class Eps:
    """The network predicts the noise; x_t = x0 + sigma * noise (variance exploding view of DDPM)."""

    name = "eps"
    const = False

    def calculate_input(self, sigma: Tensor, x: Tensor, sigma_data: float) -> Tensor:
        s = _per_sample(sigma, x.ndim)
        return x / (s ** 2 + sigma_data ** 2) ** 0.5

    def calculate_denoised(self, sigma: Tensor, out: Tensor, x: Tensor, sigma_data: float) -> Tensor:
        s = _per_sample(sigma, out.ndim)
        return x - out * s

    def noise_scaling(self, sigma: Tensor, noise: Tensor, latent: Tensor, max_denoise: bool) -> Tensor:
        s = _per_sample(sigma, noise.ndim)
        # At the top of the schedule the latent is scaled as a VP sample would be: sqrt(1 + sigma^2).
        scaled = noise * torch.sqrt(1.0 + s ** 2.0) if max_denoise else noise * s
        return scaled + latent

    def inverse_noise_scaling(self, sigma: Tensor, latent: Tensor) -> Tensor:
        return latent


class VPrediction(Eps):
    """The network predicts v = alpha * noise - sigma * x0 (Salimans & Ho), written in sigma terms."""

    name = "v"

    def calculate_denoised(self, sigma: Tensor, out: Tensor, x: Tensor, sigma_data: float) -> Tensor:
        s = _per_sample(sigma, out.ndim)
        return x * sigma_data ** 2 / (s ** 2 + sigma_data ** 2) - out * s * sigma_data / (s ** 2 + sigma_data ** 2) ** 0.5


class Const:
    """Rectified flow: x_t = (1 - sigma) * x0 + sigma * noise, the network predicts the velocity noise - x0."""

    name = "const"
    const = True

    def calculate_input(self, sigma: Tensor, x: Tensor, sigma_data: float) -> Tensor:
        return x

    def calculate_denoised(self, sigma: Tensor, out: Tensor, x: Tensor, sigma_data: float) -> Tensor:
        s = _per_sample(sigma, out.ndim)
        return x - out * s

    def noise_scaling(self, sigma: Tensor, noise: Tensor, latent: Tensor, max_denoise: bool) -> Tensor:
        s = _per_sample(sigma, noise.ndim)
        return s * noise + (1.0 - s) * latent

    def inverse_noise_scaling(self, sigma: Tensor, latent: Tensor) -> Tensor:
        s = _per_sample(sigma, latent.ndim)
        return latent / (1.0 - s)


PARAMETERISATIONS = {"eps": Eps, "v": VPrediction, "v_prediction": VPrediction, "const": Const, "flow": Const}


# --- schedules ---------------------------------------------------------------------------------------------

class ModelSampling:
    """Base: a table of sigmas (ascending, one per training timestep) plus a parameterisation."""

    sigma_data = 1.0

    def __init__(self, parameterisation: Eps | Const) -> None:
        self.param = parameterisation
        self.sigmas: Tensor = torch.empty(0)

    @property
    def prediction(self) -> str:
        return self.param.name

    @property
    def is_const(self) -> bool:
        """True for rectified-flow models (SD3, Flux): samplers switch to their flow formulations."""
        return self.param.const

    @property
    def sigma_min(self) -> Tensor:
        return self.sigmas[0]

    @property
    def sigma_max(self) -> Tensor:
        return self.sigmas[-1]

    def timestep(self, sigma: Tensor) -> Tensor:
        raise NotImplementedError

    def sigma(self, timestep: Tensor) -> Tensor:
        raise NotImplementedError

    def percent_to_sigma(self, percent: float) -> float:
        raise NotImplementedError

    def calculate_input(self, sigma: Tensor, x: Tensor) -> Tensor:
        return self.param.calculate_input(sigma, x, self.sigma_data)

    def calculate_denoised(self, sigma: Tensor, model_output: Tensor, x: Tensor) -> Tensor:
        return self.param.calculate_denoised(sigma, model_output, x, self.sigma_data)

    def noise_scaling(self, sigma: Tensor, noise: Tensor, latent_image: Tensor, max_denoise: bool = False) -> Tensor:
        return self.param.noise_scaling(sigma, noise, latent_image, max_denoise)

    def inverse_noise_scaling(self, sigma: Tensor, latent: Tensor) -> Tensor:
        return self.param.inverse_noise_scaling(sigma, latent)


def make_betas(schedule: str, timesteps: int, linear_start: float, linear_end: float, cosine_s: float = 8e-3) -> Tensor:
    """DDPM beta schedules in float64, with ComfyUI's (LDM's) names.

    "linear" is LDM's linear-in-sqrt(beta) schedule, which diffusers calls "scaled_linear"; both names are
    accepted. "sqrt_linear" is linear in beta (diffusers' "linear").
    """
    if schedule in ("linear", "scaled_linear"):
        return torch.linspace(linear_start ** 0.5, linear_end ** 0.5, timesteps, dtype=torch.float64) ** 2
    if schedule == "cosine":
        t = torch.arange(timesteps + 1, dtype=torch.float64) / timesteps + cosine_s
        alphas = torch.cos(t / (1 + cosine_s) * math.pi / 2).pow(2)
        alphas = alphas / alphas[0]
        return torch.clamp(1 - alphas[1:] / alphas[:-1], min=0, max=0.999)
    if schedule == "squaredcos_cap_v2":
        def alpha_bar(t: float) -> float:
            return math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2
        betas = [min(1 - alpha_bar((i + 1) / timesteps) / alpha_bar(i / timesteps), 0.999) for i in range(timesteps)]
        return torch.tensor(betas, dtype=torch.float64)
    if schedule == "sqrt_linear":
        return torch.linspace(linear_start, linear_end, timesteps, dtype=torch.float64)
    if schedule == "sqrt":
        return torch.linspace(linear_start, linear_end, timesteps, dtype=torch.float64) ** 0.5
    raise ValueError(f"unknown beta schedule {schedule!r}")


def rescale_zero_terminal_snr(sigmas: Tensor) -> Tensor:
    """Lin et al. 2023: shift sqrt(alpha_bar) so the last timestep has zero SNR (kept just above 0 to stay finite)."""
    sqrt_ab = (1 / (sigmas * sigmas + 1)).sqrt()
    first, last = sqrt_ab[0].clone(), sqrt_ab[-1].clone()
    sqrt_ab = (sqrt_ab - last) * (first / (first - last))
    ab = sqrt_ab ** 2
    ab[-1] = 4.8973451890853435e-08  # ComfyUI's floor: sigma_max ~ 4500 instead of infinity
    return ((1 - ab) / ab) ** 0.5


class DiscreteSampling(ModelSampling):
    """SD1/SD2/SDXL: 1000 discrete timesteps; timestep(sigma) is the nearest index in log-sigma."""

    def __init__(self, parameterisation: Eps | Const, beta_schedule: str = "linear", linear_start: float = 0.00085,
                 linear_end: float = 0.012, timesteps: int = 1000, zsnr: bool = False) -> None:
        super().__init__(parameterisation)
        betas = make_betas(beta_schedule, timesteps, linear_start, linear_end)
        alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
        sigmas = ((1 - alphas_cumprod) / alphas_cumprod) ** 0.5
        if zsnr:
            sigmas = rescale_zero_terminal_snr(sigmas)
        self.num_timesteps = int(timesteps)
        # Both tables are rounded from float64 separately, as ComfyUI does.
        self.sigmas = sigmas.float()
        self.log_sigmas = sigmas.log().float()

    def timestep(self, sigma: Tensor) -> Tensor:
        dists = sigma.log().to(self.log_sigmas.device) - self.log_sigmas[:, None]
        return dists.abs().argmin(dim=0).view(sigma.shape).to(sigma.device)

    def sigma(self, timestep: Tensor) -> Tensor:
        t = torch.clamp(timestep.float().to(self.log_sigmas.device), min=0, max=len(self.sigmas) - 1)
        lo, hi, w = t.floor().long(), t.ceil().long(), t.frac()
        return ((1 - w) * self.log_sigmas[lo] + w * self.log_sigmas[hi]).exp().to(timestep.device)

    def percent_to_sigma(self, percent: float) -> float:
        if percent <= 0.0:
            return 999999999.9
        if percent >= 1.0:
            return 0.0
        return self.sigma(torch.tensor((1.0 - percent) * 999.0)).item()


def time_snr_shift(shift: float, t: Tensor | float) -> Tensor | float:
    """SD3's timestep shift: t' = shift * t / (1 + (shift - 1) * t)."""
    if shift == 1.0:
        return t
    return shift * t / (1 + (shift - 1) * t)


def flux_time_shift(mu: float, power: float, t: Tensor | float) -> Tensor | float:
    """Flux's shift: e^mu / (e^mu + (1/t - 1)^power)."""
    return math.exp(mu) / (math.exp(mu) + (1 / t - 1) ** power)


class FlowSampling(ModelSampling):
    """SD3 / AuraFlow: sigma = shifted t, timestep = sigma * multiplier."""

    def __init__(self, parameterisation: Eps | Const, shift: float = 1.0, multiplier: float = 1000,
                 timesteps: int = 1000) -> None:
        super().__init__(parameterisation)
        self.shift = shift
        self.multiplier = multiplier
        self.sigmas = self.sigma((torch.arange(1, timesteps + 1, 1) / timesteps) * multiplier)

    def timestep(self, sigma: Tensor) -> Tensor:
        return sigma * self.multiplier

    def sigma(self, timestep: Tensor) -> Tensor:
        return time_snr_shift(self.shift, timestep / self.multiplier)

    def percent_to_sigma(self, percent: float) -> float:
        if percent <= 0.0:
            return 1.0
        if percent >= 1.0:
            return 0.0
        return time_snr_shift(self.shift, 1.0 - percent)


class FluxSampling(ModelSampling):
    """Flux: sigma = flux_time_shift(shift, 1, t) over 10000 points, timestep = sigma."""

    def __init__(self, parameterisation: Eps | Const, shift: float = 1.15, timesteps: int = 10000) -> None:
        super().__init__(parameterisation)
        self.shift = shift
        self.sigmas = self.sigma(torch.arange(1, timesteps + 1, 1) / timesteps)

    def timestep(self, sigma: Tensor) -> Tensor:
        return sigma

    def sigma(self, timestep: Tensor) -> Tensor:
        return flux_time_shift(self.shift, 1.0, timestep)

    def percent_to_sigma(self, percent: float) -> float:
        if percent <= 0.0:
            return 1.0
        if percent >= 1.0:
            return 0.0
        return flux_time_shift(self.shift, 1.0, 1.0 - percent)


def model_sampling_from_config(cfg: dict[str, Any]) -> ModelSampling:
    """Build a ModelSampling from a plain dict (so it can travel between processes as JSON).

    {"kind": "discrete", "prediction": "eps"|"v", "beta_schedule": ..., "linear_start": ..., "linear_end": ...,
     "timesteps": 1000, "zsnr": False}; {"kind": "flow", "shift": 3.0, "multiplier": 1000};
    {"kind": "flux", "shift": 1.15}. Flow kinds default to the CONST parameterisation.
    """
    kind = cfg.get("kind", "discrete")
    if kind == "discrete":
        param = PARAMETERISATIONS[cfg.get("prediction", "eps")]()
        return DiscreteSampling(param, beta_schedule=cfg.get("beta_schedule", "linear"),
                                linear_start=cfg.get("linear_start", 0.00085), linear_end=cfg.get("linear_end", 0.012),
                                timesteps=cfg.get("timesteps", 1000), zsnr=cfg.get("zsnr", False))
    if kind == "flow":
        param = PARAMETERISATIONS[cfg.get("prediction", "const")]()
        return FlowSampling(param, shift=cfg.get("shift", 1.0), multiplier=cfg.get("multiplier", 1000),
                            timesteps=cfg.get("timesteps", 1000))
    if kind == "flux":
        param = PARAMETERISATIONS[cfg.get("prediction", "const")]()
        return FluxSampling(param, shift=cfg.get("shift", 1.15), timesteps=cfg.get("timesteps", 10000))
    raise ValueError(f"unknown model sampling kind {kind!r}")
