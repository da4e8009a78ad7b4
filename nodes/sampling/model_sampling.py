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
        return x / (s**2 + sigma_data**2) ** 0.5

    def calculate_denoised(self, sigma: Tensor, out: Tensor, x: Tensor, sigma_data: float) -> Tensor:
        s = _per_sample(sigma, out.ndim)
        return x - out * s

    def noise_scaling(self, sigma: Tensor, noise: Tensor, latent: Tensor, max_denoise: bool) -> Tensor:
        s = _per_sample(sigma, noise.ndim)
        # At the top of the schedule the latent is scaled as a VP sample would be: sqrt(1 + sigma^2).
        scaled = noise * torch.sqrt(1.0 + s**2.0) if max_denoise else noise * s
        return scaled + latent

    def inverse_noise_scaling(self, sigma: Tensor, latent: Tensor) -> Tensor:
        return latent


class VPrediction(Eps):
    """The network predicts v = alpha * noise - sigma * x0 (Salimans & Ho), written in sigma terms."""

    name = "v"

    def calculate_denoised(self, sigma: Tensor, out: Tensor, x: Tensor, sigma_data: float) -> Tensor:
        s = _per_sample(sigma, out.ndim)
        return x * sigma_data**2 / (s**2 + sigma_data**2) - out * s * sigma_data / (s**2 + sigma_data**2) ** 0.5


class VPredictionDDPM(Eps):
    """CogVideoX's v-prediction (the newest ComfyUI's V_PREDICTION_DDPM): the network sees the noisy latent
    unscaled and predicts v; x0 = (x - v * sigma) / sqrt(sigma^2 + 1). Noise is added as for eps."""

    name = "v_ddpm"

    def calculate_input(self, sigma: Tensor, x: Tensor, sigma_data: float) -> Tensor:
        return x

    def calculate_denoised(self, sigma: Tensor, out: Tensor, x: Tensor, sigma_data: float) -> Tensor:
        s = _per_sample(sigma, out.ndim)
        return x / (s**2 + 1.0) ** 0.5 - out * s / (s**2 + 1.0) ** 0.5


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


class ImgToImgVelocity(Const):
    """Deterministic image-to-image flow (today's ComfyUI's IMG_TO_IMG_VELOCITY, Marigold V2): the network sees the
    encoded image itself, unscaled and un-noised, and predicts a velocity v with x0 = input - v at any sigma."""

    name = "img_to_img_velocity"

    def calculate_denoised(self, sigma: Tensor, out: Tensor, x: Tensor, sigma_data: float) -> Tensor:
        return x - out

    def noise_scaling(self, sigma: Tensor, noise: Tensor, latent: Tensor, max_denoise: bool) -> Tensor:
        return latent


class X0(Eps):
    """The network predicts the clean latent itself."""

    name = "x0"

    def calculate_denoised(self, sigma: Tensor, out: Tensor, x: Tensor, sigma_data: float) -> Tensor:
        return out


class ImgToImg(X0):
    """x0 prediction on the unscaled noisy latent (ComfyUI's IMG_TO_IMG)."""

    name = "img_to_img"

    def calculate_input(self, sigma: Tensor, x: Tensor, sigma_data: float) -> Tensor:
        return x


class Lcm(Eps):
    """Latent consistency models: the eps estimate of x0 blended with the input by LCM's boundary-condition
    coefficients at timestep * 10 (sigma_data 0.5). Needs the schedule's timestep(sigma), bound on creation."""

    name = "lcm"

    def __init__(self, timestep: Any) -> None:
        self.timestep = timestep

    def calculate_denoised(self, sigma: Tensor, out: Tensor, x: Tensor, sigma_data: float) -> Tensor:
        t = self.timestep(sigma).view(sigma.shape[:1] + (1,) * (out.ndim - 1))
        s = sigma.view(sigma.shape[:1] + (1,) * (out.ndim - 1))
        x0 = x - out * s
        lcm_data, scaled = 0.5, t * 10.0
        c_skip = lcm_data**2 / (scaled**2 + lcm_data**2)
        c_out = scaled / (scaled**2 + lcm_data**2) ** 0.5
        return c_out * x0 + c_skip * x


class Edm(VPrediction):
    """EDM's preconditioning (Karras et al. 2022): the network output enters the denoised estimate with a plus
    sign, x * sd^2 / (s^2 + sd^2) + out * s * sd / sqrt(s^2 + sd^2)."""

    name = "edm"

    def calculate_denoised(self, sigma: Tensor, out: Tensor, x: Tensor, sigma_data: float) -> Tensor:
        s = _per_sample(sigma, out.ndim)
        return x * sigma_data**2 / (s**2 + sigma_data**2) + out * s * sigma_data / (s**2 + sigma_data**2) ** 0.5


class CosmosRFlow:
    """Cosmos' rectified flow in EDM sigmas: the flow time is t = sigma / (sigma + 1), the input is scaled by
    1 - t and the network predicts the velocity; noise is added EDM-style (latent + sigma * noise)."""

    name = "cosmos_rflow"
    const = False

    def calculate_input(self, sigma: Tensor, x: Tensor, sigma_data: float) -> Tensor:
        t = _per_sample(sigma / (sigma + 1), x.ndim)
        return x * (1.0 - t)

    def calculate_denoised(self, sigma: Tensor, out: Tensor, x: Tensor, sigma_data: float) -> Tensor:
        t = _per_sample(sigma / (sigma + 1), out.ndim)
        return x * (1.0 - t) - out * t

    def noise_scaling(self, sigma: Tensor, noise: Tensor, latent: Tensor, max_denoise: bool) -> Tensor:
        return noise * _per_sample(sigma, noise.ndim) + latent

    def inverse_noise_scaling(self, sigma: Tensor, latent: Tensor) -> Tensor:
        return latent


PARAMETERISATIONS = {
    "eps": Eps,
    "v": VPrediction,
    "v_prediction": VPrediction,
    "v_ddpm": VPredictionDDPM,
    "const": Const,
    "flow": Const,
    "x0": X0,
    "img_to_img": ImgToImg,
    "img_to_img_velocity": ImgToImgVelocity,
    "edm": Edm,
    "cosmos_rflow": CosmosRFlow,
}


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

    def calculate_input(self, sigma: Tensor, noise: Tensor) -> Tensor:
        """The model's input for the noisy latent `noise` at sigma (ComfyUI's argument names)."""
        return self.param.calculate_input(sigma, noise, self.sigma_data)

    def calculate_denoised(self, sigma: Tensor, model_output: Tensor, model_input: Tensor) -> Tensor:
        return self.param.calculate_denoised(sigma, model_output, model_input, self.sigma_data)

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
        return torch.linspace(linear_start**0.5, linear_end**0.5, timesteps, dtype=torch.float64) ** 2
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
    ab = sqrt_ab**2
    ab[-1] = 4.8973451890853435e-08  # ComfyUI's floor: sigma_max ~ 4500 instead of infinity
    return ((1 - ab) / ab) ** 0.5


class DiscreteSampling(ModelSampling):
    """SD1/SD2/SDXL: 1000 discrete timesteps; timestep(sigma) is the nearest index in log-sigma."""

    def __init__(
        self,
        parameterisation: Eps | Const,
        beta_schedule: str = "linear",
        linear_start: float = 0.00085,
        linear_end: float = 0.012,
        timesteps: int = 1000,
        zsnr: bool = False,
    ) -> None:
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


class DistilledDiscreteSampling(DiscreteSampling):
    """LCM's schedule: every (timesteps / 50)-th sigma of the discrete table, timesteps mapped back onto the
    1000-step grid."""

    original_timesteps = 50

    def __init__(self, parameterisation: Eps | Const, **kwargs: Any) -> None:
        super().__init__(parameterisation, **kwargs)
        self.skip_steps = self.num_timesteps // self.original_timesteps
        full = self.sigmas
        valid = torch.zeros(self.original_timesteps, dtype=torch.float32)
        for k in range(self.original_timesteps):
            valid[self.original_timesteps - 1 - k] = full[self.num_timesteps - 1 - k * self.skip_steps]
        # ComfyUI takes the log of the float32 subset (not of the float64 table) here.
        self.sigmas, self.log_sigmas = valid, valid.log().float()

    def timestep(self, sigma: Tensor) -> Tensor:
        dists = sigma.log().to(self.log_sigmas.device) - self.log_sigmas[:, None]
        idx = dists.abs().argmin(dim=0).view(sigma.shape)
        return (idx * self.skip_steps + (self.skip_steps - 1)).to(sigma.device)

    def sigma(self, timestep: Tensor) -> Tensor:
        t = ((timestep.float().to(self.log_sigmas.device) - (self.skip_steps - 1)) / self.skip_steps).float()
        t = torch.clamp(t, min=0, max=len(self.sigmas) - 1)
        lo, hi, w = t.floor().long(), t.ceil().long(), t.frac()
        return ((1 - w) * self.log_sigmas[lo] + w * self.log_sigmas[hi]).exp().to(timestep.device)


class ContinuousEDMSampling(ModelSampling):
    """Continuous-time EDM models: 1000 sigmas log-spaced between sigma_min and sigma_max,
    timestep = log(sigma) / 4."""

    def __init__(
        self, parameterisation: Eps | Const, sigma_min: float = 0.002, sigma_max: float = 120.0, sigma_data: float = 1.0
    ) -> None:
        super().__init__(parameterisation)
        self.sigma_data = sigma_data
        sigmas = torch.linspace(math.log(sigma_min), math.log(sigma_max), 1000).exp()
        self.sigmas, self.log_sigmas = sigmas.float(), sigmas.log().float()

    def timestep(self, sigma: Tensor) -> Tensor:
        return 0.25 * sigma.log()

    def sigma(self, timestep: Tensor) -> Tensor:
        return (timestep / 0.25).exp()

    def percent_to_sigma(self, percent: float) -> float:
        if percent <= 0.0:
            return 999999999.9
        if percent >= 1.0:
            return 0.0
        log_min = math.log(self.sigma_min)
        return math.exp((math.log(self.sigma_max) - log_min) * (1.0 - percent) + log_min)


class ContinuousVSampling(ContinuousEDMSampling):
    """Continuous-time v models: timestep = atan(sigma) * 2 / pi."""

    def timestep(self, sigma: Tensor) -> Tensor:
        return sigma.atan() / math.pi * 2

    def sigma(self, timestep: Tensor) -> Tensor:
        return (timestep * math.pi / 2).tan()


class CosmosRFlowSampling(ContinuousEDMSampling):
    """Cosmos' rectified flow on the EDM sigma table: timestep = sigma / (sigma + 1), capped at sigma_max."""

    def timestep(self, sigma: Tensor) -> Tensor:
        return sigma / (sigma + 1)

    def sigma(self, timestep: Tensor) -> Tensor:
        sigma_max = self.sigma_max
        if timestep >= (sigma_max / (sigma_max + 1)):
            return sigma_max
        return timestep / (1 - timestep)


class StableCascadeSampling(ModelSampling):
    """Würstchen/Stable Cascade: a cosine alpha_bar over t in (0, 1], its log-SNR shifted by -2 log(shift),
    clamped to [1e-4, 0.9999]; 10000 table points."""

    def __init__(self, parameterisation: Eps | Const, shift: float = 1.0, cosine_s: float = 8e-3) -> None:
        super().__init__(parameterisation)
        self.shift = shift
        self.cosine_s = torch.tensor(cosine_s)
        self.init_alpha_cumprod = torch.cos(self.cosine_s / (1 + self.cosine_s) * torch.pi * 0.5) ** 2
        self.num_timesteps = 10000
        # t rounded from float64 to float32, as ComfyUI's per-index Python floats are
        t = (torch.arange(1, self.num_timesteps + 1, dtype=torch.float64) / self.num_timesteps).float()
        sigmas = self.sigma(t).float()
        self.sigmas, self.log_sigmas = sigmas, sigmas.log().float()

    def sigma(self, timestep: Tensor) -> Tensor:
        ac = torch.cos((timestep + self.cosine_s) / (1 + self.cosine_s) * torch.pi * 0.5) ** 2 / self.init_alpha_cumprod
        if self.shift != 1.0:
            log_snr = (ac / (1 - ac)).log() + 2 * torch.log(1.0 / torch.tensor(self.shift))
            ac = log_snr.sigmoid()
        ac = ac.clamp(0.0001, 0.9999)
        return ((1 - ac) / ac) ** 0.5

    def timestep(self, sigma: Tensor) -> Tensor:
        var = (1 / (sigma * sigma + 1)).clamp(0, 1.0)
        s, min_var = self.cosine_s.to(var.device), self.init_alpha_cumprod.to(var.device)
        return (((var * min_var) ** 0.5).acos() / (torch.pi * 0.5)) * (1 + s) - s

    def percent_to_sigma(self, percent: float) -> float:
        if percent <= 0.0:
            return 999999999.9
        if percent >= 1.0:
            return 0.0
        return float(self.sigma(torch.tensor(1.0 - percent)))


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

    def __init__(
        self,
        parameterisation: Eps | Const,
        shift: float = 1.0,
        multiplier: float = 1000,
        timesteps: int = 1000,
        noise_scale: float = 1.0,
    ) -> None:
        super().__init__(parameterisation)
        self.shift = shift
        self.multiplier = multiplier
        # the model's training noise scale (ModelNoiseScale): rectified flow noises with noise_scale * noise
        self.noise_scale = noise_scale
        self.sigmas = self.sigma((torch.arange(1, timesteps + 1, 1) / timesteps) * multiplier)

    def noise_scaling(self, sigma: Tensor, noise: Tensor, latent_image: Tensor, max_denoise: bool = False) -> Tensor:
        # only plain rectified flow reads the scale (ComfyUI's CONST); the img2img variants keep their own rule
        if type(self.param).noise_scaling is Const.noise_scaling and self.noise_scale != 1.0:
            noise = self.noise_scale * noise
        return self.param.noise_scaling(sigma, noise, latent_image, max_denoise)

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
     "timesteps": 1000, "zsnr": False}; {"kind": "flow", "shift": 3.0, "multiplier": 1000, "noise_scale": 1.0};
    {"kind": "flux", "shift": 1.15}; {"kind": "continuous_edm" | "continuous_v", "prediction": ..., "sigma_min": ...,
    "sigma_max": ..., "sigma_data": ...}; {"kind": "stable_cascade", "shift": 2.0}. Discrete predictions also
    take "x0", "img_to_img" and "lcm". Flow kinds default to the CONST parameterisation.
    """
    kind = cfg.get("kind", "discrete")
    if kind == "discrete":
        prediction = cfg.get("prediction", "eps")
        table = dict(
            beta_schedule=cfg.get("beta_schedule", "linear"),
            linear_start=cfg.get("linear_start", 0.00085),
            linear_end=cfg.get("linear_end", 0.012),
            timesteps=cfg.get("timesteps", 1000),
            zsnr=cfg.get("zsnr", False),
        )
        if prediction == "lcm":  # LCM models also sample LCM's 50-step subset of the table
            ms = DistilledDiscreteSampling(Eps(), **table)
            ms.param = Lcm(ms.timestep)
            return ms
        return DiscreteSampling(PARAMETERISATIONS[prediction](), **table)
    if kind in ("continuous_edm", "continuous_v", "cosmos_rflow"):
        base = {
            "continuous_edm": ContinuousEDMSampling,
            "continuous_v": ContinuousVSampling,
            "cosmos_rflow": CosmosRFlowSampling,
        }[kind]
        return base(
            PARAMETERISATIONS[cfg.get("prediction", "eps")](),
            sigma_min=cfg.get("sigma_min", 0.002),
            sigma_max=cfg.get("sigma_max", 120.0),
            sigma_data=cfg.get("sigma_data", 1.0),
        )
    if kind == "stable_cascade":
        return StableCascadeSampling(Eps(), shift=cfg.get("shift", 1.0))
    if kind == "flow":
        param = PARAMETERISATIONS[cfg.get("prediction", "const")]()
        return FlowSampling(
            param,
            shift=cfg.get("shift", 1.0),
            multiplier=cfg.get("multiplier", 1000),
            timesteps=cfg.get("timesteps", 1000),
            noise_scale=cfg.get("noise_scale", 1.0),
        )
    if kind == "flux":
        param = PARAMETERISATIONS[cfg.get("prediction", "const")]()
        return FluxSampling(param, shift=cfg.get("shift", 1.15), timesteps=cfg.get("timesteps", 10000))
    raise ValueError(f"unknown model sampling kind {kind!r}")
