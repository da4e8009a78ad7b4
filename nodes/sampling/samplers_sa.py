"""SA-Solver, the stochastic Adams predictor-corrector (Xue et al., NeurIPS 2023, arXiv 2309.05019), in data
prediction over the half log-SNR lambda, as k-diffusion's sa_solver / sa_solver_pece run it.

Per step i: the model evaluates the predicted state at sigma_i; the corrector re-integrates the step from the
previous corrected state with the newest prediction (PECE: and evaluates the model again there); the predictor
then extrapolates from the corrected state to sigma_i+1 with the last predictions. The step's x in and out is the
predicted state; the corrected state, the prediction history, the previous step size, stochasticity and noise
live in the sampler state. As k-diffusion does, the last step returns the corrected state.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .model_sampling import ModelSampling
from .noise import NoiseSampler
from .sampler_base import DENOISED, Model, Sampler, call_model, half_log_snr, offset_first_sigma

CORRECTED, PREDICTIONS, STEP, TAU, NOISE = "sa_x", "sa_predictions", "sa_h", "sa_tau", "sa_noise"


def exponential_coeffs(s: Tensor, t: Tensor, order: int, tau: float) -> Tensor:
    """(1 + tau^2) * integral_s^t e^((1 + tau^2) x) x^p dx for p < order, with e^((1 + tau^2) t) factored out:
    integration by parts unrolled into a lower-triangular matrix of (signed) factorial ratios."""
    tau_mul = 1 + tau**2
    p = torch.arange(order, dtype=s.dtype, device=s.device)
    boundary = t**p - s**p * (-tau_mul * (t - s)).exp()
    depth = p.unsqueeze(1) - p.unsqueeze(0)
    log_factorial = (p + 1).lgamma()
    log_coeff = log_factorial.unsqueeze(1) - log_factorial.unsqueeze(0)
    if tau > 0:
        log_coeff = log_coeff - depth * math.log(tau_mul)
    signs = torch.where(depth % 2 == 0, 1.0, -1.0)
    return (log_coeff.exp() * signs).tril() @ boundary


def adams_coeffs(
    sigma_next: Tensor,
    lambdas: Tensor,
    lambda_s: Tensor,
    lambda_t: Tensor,
    tau: float,
    simple_order_2: bool,
    corrector: bool,
) -> Tensor:
    """The b_i weights of the predictions at `lambdas` for the step lambda_s -> lambda_t (the integrals of their
    Lagrange basis polynomials), or the paper's simplified order-2 weights."""
    n = lambdas.shape[0]
    alpha_t = sigma_next * lambda_t.exp()
    if simple_order_2 and n == 2:
        tau_mul = 1 + tau**2
        h = lambda_t - lambda_s
        if corrector:
            b_1 = alpha_t * (0.5 * tau_mul * h)
            b_2 = alpha_t * (-h * tau_mul).expm1().neg() - b_1
        else:
            b_2 = alpha_t * (0.5 * tau_mul * h**2) / (lambdas[-2] - lambda_s)
            b_1 = alpha_t * (-h * tau_mul).expm1().neg() - b_2
        return torch.stack([b_2, b_1])
    integrals = torch.linalg.solve(
        torch.vander(lambdas, n, increasing=True).T, exponential_coeffs(lambda_s, lambda_t, n, tau)
    )
    return alpha_t * integrals


def _combine(predictions: list[Tensor], coeffs: Tensor) -> Tensor:
    return torch.tensordot(torch.stack(predictions, dim=1), coeffs, dims=([1], [0]))


class SASolver(Sampler):
    """`tau` is (eta, start sigma, end sigma) of the stochastic interval; None: eta 1 between the model's sigmas
    at 20 % and 80 % of the schedule (KSampler's sa_solver)."""

    noise_kind = "gaussian"
    reads_model_sampling = True

    def __init__(
        self,
        use_pece: bool = False,
        s_noise: float = 1.0,
        predictor_order: int = 3,
        corrector_order: int = 4,
        simple_order_2: bool = False,
        tau: tuple[float, float, float] | None = None,
    ) -> None:
        self.use_pece, self.s_noise, self.simple_order_2, self.tau = use_pece, s_noise, simple_order_2, tau
        self.predictor_order, self.corrector_order = predictor_order, corrector_order
        self.name = "sa_solver_pece" if use_pece else "sa_solver"

    def _tau(self, sigma: Tensor, model_sampling: ModelSampling | None) -> float:
        if self.tau is None:
            if model_sampling is None:
                raise ValueError("sa_solver needs the model's sampling to place its stochastic interval")
            eta, start, end = 1.0, model_sampling.percent_to_sigma(0.2), model_sampling.percent_to_sigma(0.8)
        else:
            eta, start, end = self.tau
        if eta <= 0:
            return 0.0
        return eta if start >= sigma.item() >= end else 0.0

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
        ms = model_sampling if model_sampling is not None and model_sampling.is_const else None
        sigmas = offset_first_sigma(sigmas, ms)
        lambdas = half_log_snr(sigmas, ms)
        x_pred = x
        x = state.get(CORRECTED, x_pred)
        tau = float(state[TAU]) if TAU in state else 0.0
        h, step_noise = state.get(STEP), state.get(NOISE)
        most = max(self.predictor_order, self.corrector_order)

        denoised = call_model(model, x_pred, sigmas[i])
        state[DENOISED] = denoised
        predictions = (list(state[PREDICTIONS].unbind(0)) if PREDICTIONS in state else []) + [denoised]
        predictions = predictions[-most:]
        predictor_order = min(self.predictor_order, len(predictions))
        if i == 0 or (sigmas[i + 1] == 0 and not self.use_pece):
            corrector_order = 0
        else:
            corrector_order = min(self.corrector_order, len(predictions))
        if sigmas[-1].item() == 0:  # lower orders towards the end, for stability
            predictor_order = min(predictor_order, len(sigmas) - 2 - i)
            corrector_order = min(corrector_order, len(sigmas) - 1 - i)

        if corrector_order == 0:
            x = x_pred
        else:
            coeffs = adams_coeffs(
                sigmas[i],
                lambdas[i - corrector_order + 1 : i + 1],
                lambdas[i - 1],
                lambdas[i],
                tau,
                self.simple_order_2,
                corrector=True,
            )
            x = sigmas[i] / sigmas[i - 1] * (-(tau**2) * h).exp() * x + _combine(predictions[-corrector_order:], coeffs)
            if tau > 0 and self.s_noise > 0:
                x = x + step_noise
            if self.use_pece:
                denoised = call_model(model, x, sigmas[i])
                predictions[-1] = denoised
        state[PREDICTIONS] = torch.stack(predictions)

        if sigmas[i + 1] == 0:
            state[CORRECTED] = x = denoised
            return x
        tau = self._tau(sigmas[i + 1], model_sampling)
        coeffs = adams_coeffs(
            sigmas[i + 1],
            lambdas[i - predictor_order + 1 : i + 1],
            lambdas[i],
            lambdas[i + 1],
            tau,
            self.simple_order_2,
            corrector=False,
        )
        h = lambdas[i + 1] - lambdas[i]
        x_pred = sigmas[i + 1] / sigmas[i] * (-(tau**2) * h).exp() * x + _combine(
            predictions[-predictor_order:], coeffs
        )
        if tau > 0 and self.s_noise > 0:
            step_noise = (
                noise(sigmas[i], sigmas[i + 1]) * sigmas[i + 1] * (-2 * tau**2 * h).expm1().neg().sqrt() * self.s_noise
            )
            x_pred = x_pred + step_noise
            state[NOISE] = step_noise
        state[CORRECTED], state[STEP] = x, h
        state[TAU] = torch.tensor(tau, dtype=torch.float64)
        # k-diffusion returns the corrected state when the schedule ends above sigma 0.
        return x if i == len(sigmas) - 2 else x_pred
