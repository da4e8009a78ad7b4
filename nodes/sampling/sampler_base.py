"""The step-function shape every sampler has, and the small formulas samplers share.

A sampler is a pure step: `step(model, x, sigmas, i, state, noise)` moves x from sigmas[i] to sigmas[i + 1]
(with whatever model calls the method needs), reads its history from `state` and writes the new history back.
`state` holds only tensors so it can be serialised between steps that run in different processes; after each
step `state["denoised"]` is that step's x0 prediction (previews use it, multistep methods read it as the
previous step's prediction).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from .model_sampling import ModelSampling
from .noise import BrownianNoise, GaussianNoise, NoiseSampler, NoNoise

Model = Callable[[Tensor, Tensor], Tensor]
"""model(x, sigma) -> denoised x0 prediction; sigma is a [B] tensor."""

DENOISED = "denoised"


class Sampler:
    """Base class. `noise_kind` says which noise sampler `make_noise` rebuilds from (seed, state):
    "none", "gaussian", "brownian" (CPU tree) or "brownian_device" (tree on x's device, the *_gpu samplers)."""

    name: str = ""
    noise_kind: str = "none"
    # CFG++ samplers (Chung et al. 2024) also read the negative side's prediction: see call_model_cfg_pp.
    cfg_pp: bool = False
    # Samplers that read the model's sampling (schedule positions) for any model, not only rectified flow.
    reads_model_sampling: bool = False
    # Samplers whose step depends on the whole batch (an error norm over it): requests must not share a step.
    couples_batch: bool = False
    # Samplers that start from the noise as drawn (VOID's DDIM): no noise scaling, no input latent, no unscaling.
    starts_from_noise: bool = False

    def make_noise(self, seed: int, x: Tensor, sigmas: Tensor, state: dict[str, Tensor]) -> NoiseSampler:
        if self.noise_kind == "gaussian":
            return GaussianNoise.from_state(seed, x, state)
        if self.noise_kind in ("brownian", "brownian_device"):
            return BrownianNoise.from_state(seed, x, sigmas, state, on_device=self.noise_kind == "brownian_device")
        return NoNoise()

    def step(
        self,
        model: Model,
        x: Tensor,
        sigmas: Tensor,
        i: int,
        state: dict[str, Tensor],
        noise: NoiseSampler,
        *,
        model_sampling: ModelSampling | None = None,
    ) -> Tensor:
        raise NotImplementedError

    def finished(self, i: int, sigmas: Tensor, state: dict[str, Tensor]) -> bool:
        """Whether the sampling loop is over before step i: after the schedule's last step, for every sampler
        but the adaptive ones, which decide from their state."""
        return i >= len(sigmas) - 1

    def __repr__(self) -> str:
        return f"<Sampler {self.name}>"


def call_model(model: Model, x: Tensor, sigma: Tensor) -> Tensor:
    """k-diffusion's convention: the model gets one sigma per batch item."""
    return model(x, sigma * x.new_ones([x.shape[0]]))


def call_model_cfg_pp(model: Model, x: Tensor, sigma: Tensor) -> tuple[Tensor, Tensor]:
    """(guided prediction, negative side's prediction). The denoiser keeps the latter as `uncond_denoised`
    after each call when the sampler is a CFG++ one (nodes.modelfns.denoise.GuidedDenoiser); a model without
    guidance has a single prediction, which is then both."""
    denoised = call_model(model, x, sigma)
    uncond = getattr(model, "uncond_denoised", None)
    return denoised, denoised if uncond is None else uncond


def append_dims(v: Tensor, ndim: int) -> Tensor:
    return v[(...,) + (None,) * (ndim - v.ndim)]


def to_d(x: Tensor, sigma: Tensor, denoised: Tensor) -> Tensor:
    """The probability-flow ODE derivative dx/dsigma = (x - D(x)) / sigma (Karras et al. 2022)."""
    return (x - denoised) / append_dims(sigma, x.ndim)


def ancestral_step(sigma_from: Tensor, sigma_to: Tensor, eta: float = 1.0) -> tuple[Tensor, Tensor | float]:
    """Split sigma_from -> sigma_to into a deterministic step down to sigma_down and fresh noise of sigma_up."""
    if not eta:
        return sigma_to, 0.0
    sigma_up = min(sigma_to, eta * (sigma_to**2 * (sigma_from**2 - sigma_to**2) / sigma_from**2) ** 0.5)
    sigma_down = (sigma_to**2 - sigma_up**2) ** 0.5
    return sigma_down, sigma_up


def flow_ancestral_step(sigma: Tensor, sigma_next: Tensor, eta: float) -> tuple[Tensor, Tensor, Tensor]:
    """Rectified-flow counterpart of ancestral_step: returns (sigma_down, alpha ratio, renoise coefficient).

    x at sigma_down is rescaled by (1 - sigma_next) / (1 - sigma_down) and renoised so its marginal matches
    sigma_next under x_t = (1 - t) x0 + t noise.
    """
    sigma_down = sigma_next * (1 + (sigma_next / sigma - 1) * eta)
    alpha_next, alpha_down = 1 - sigma_next, 1 - sigma_down
    renoise = (sigma_next**2 - sigma_down**2 * alpha_next**2 / alpha_down**2) ** 0.5
    return sigma_down, alpha_next / alpha_down, renoise


def is_const(model_sampling: ModelSampling | None) -> bool:
    return model_sampling is not None and model_sampling.is_const


def half_log_snr(sigma: Tensor, model_sampling: ModelSampling | None) -> Tensor:
    """lambda = log(alpha / sigma): -log(sigma) for VE/VP, log((1 - sigma) / sigma) for rectified flow."""
    if is_const(model_sampling):
        return sigma.logit().neg()
    return sigma.log().neg()


def sigma_from_half_log_snr(lam: Tensor, model_sampling: ModelSampling | None) -> Tensor:
    if is_const(model_sampling):
        return lam.neg().sigmoid()
    return lam.neg().exp()


def offset_first_sigma(sigmas: Tensor, model_sampling: ModelSampling | None) -> Tensor:
    """Flow schedules start at sigma = 1 where lambda is -inf; the SDE samplers start just below it instead."""
    if len(sigmas) > 1 and is_const(model_sampling) and sigmas[0] >= 1:
        sigmas = sigmas.clone()
        sigmas[0] = model_sampling.percent_to_sigma(1e-4)
    return sigmas


def push_history(state: dict[str, Tensor], keys: list[str], value: Tensor | None) -> None:
    """Shift a short history kept under keys[0] (newest) .. keys[-1] (oldest) and put `value` first."""
    for newer, older in zip(reversed(keys[:-1]), reversed(keys[1:])):
        if newer in state:
            state[older] = state[newer]
        else:
            state.pop(older, None)
    if value is None:
        state.pop(keys[0], None)
    else:
        state[keys[0]] = value


def stack_history(state: dict[str, Tensor], key: str, value: Tensor, keep: int) -> list[Tensor]:
    """Append `value` to a stacked history (oldest first), keep the last `keep`, store it; return it as a list."""
    items = list(state[key].unbind(0)) if key in state else []
    items = (items + [value])[-keep:]
    state[key] = torch.stack(items)
    return items
