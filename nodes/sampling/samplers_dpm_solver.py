"""DPM-Solver in noise prediction (Lu et al. 2022, arXiv 2206.00927) as k-diffusion's dpm_fast and dpm_adaptive
run it: singlestep solvers of order 1-3 over t = -log(sigma) from the schedule's first sigma to its last non-zero
one. Neither follows the schedule's steps, so each maps onto the one-invocation-per-step loop its own way:

- dpm_fast spends exactly len(sigmas) - 1 model evaluations (as many as the loop has steps) on
  floor(n / 3) + 1 evenly spaced solver steps of order 3 (the last ones of order 2 and 1, or n mod 3). One
  invocation is one model evaluation: the solver step's start, the predictions so far and its stage travel in
  the sampler state, and the step completes in the invocation of its last evaluation.
- dpm_adaptive chooses its step sizes by an embedded error estimate and a PID controller, so the number of
  steps is known only at the end. One invocation is one attempted step (2 or 3 model evaluations); the loop
  asks `Sampler.finished` after each and stops when the solver has reached the end of the schedule.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .model_sampling import ModelSampling
from .noise import NoiseSampler
from .sampler_base import DENOISED, Model, Sampler, ancestral_step, call_model

START, PREDICTIONS = "dpm_x", "dpm_eps"
POSITION, STEP_SIZE, ERRORS, PREVIOUS = "dpm_s", "dpm_h", "dpm_errs", "dpm_x_prev"


def _t(sigma: Tensor) -> Tensor:
    return -sigma.log()


def _sigma(t: Tensor) -> Tensor:
    return t.neg().exp()


def _range(sigmas: Tensor) -> tuple[Tensor, Tensor]:
    """t of the first sigma and of the last non-zero one (ComfyUI's sigma_max and sigma_min)."""
    sigma_min = sigmas[-1] if sigmas[-1] != 0 else sigmas[-2]
    return _t(torch.tensor(float(sigmas[0]))), _t(torch.tensor(float(sigma_min)))


def _eps(model: Model, x: Tensor, t: Tensor) -> Tensor:
    return (x - call_model(model, x, _sigma(t))) / _sigma(t)


def _stage_point(x: Tensor, t: Tensor, h: Tensor, eps: list[Tensor], r1: float) -> tuple[Tensor, Tensor]:
    """Where the solver evaluates its next prediction: (x at it, its t), after len(eps) evaluations."""
    if not eps:
        return x, t
    if len(eps) == 1:
        s1 = t + r1 * h
        return x - _sigma(s1) * (r1 * h).expm1() * eps[0], s1
    r1, r2 = 1 / 3, 2 / 3
    s2 = t + r2 * h
    return (
        x
        - _sigma(s2) * (r2 * h).expm1() * eps[0]
        - _sigma(s2) * (r2 / r1) * ((r2 * h).expm1() / (r2 * h) - 1) * (eps[1] - eps[0])
    ), s2


def _solve(x: Tensor, t: Tensor, t_next: Tensor, eps: list[Tensor], order: int, r1: float) -> Tensor:
    """The order-1/2/3 DPM-Solver step from t to t_next with the stage predictions eps."""
    h = t_next - t
    first = x - _sigma(t_next) * h.expm1() * eps[0]
    if order == 1:
        return first
    if order == 2:
        return first - _sigma(t_next) / (2 * r1) * h.expm1() * (eps[1] - eps[0])
    return first - _sigma(t_next) / (2 / 3) * (h.expm1() / h - 1) * (eps[2] - eps[0])


def _fast_orders(n: int) -> list[int]:
    m = math.floor(n / 3) + 1
    return [3] * (m - 2) + [2, 1] if n % 3 == 0 else [3] * (m - 1) + [n % 3]


class DPMFast(Sampler):
    """DPM-Solver-fast (fixed steps): one model evaluation per invocation, see the module docstring."""

    name = "dpm_fast"

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
        n = len(sigmas) - 1
        orders = _fast_orders(n)
        t_start, t_end = _range(sigmas)
        ts = torch.linspace(t_start, t_end, math.floor(n / 3) + 2, device=x.device)
        j, stage = 0, i
        while stage >= orders[j]:
            stage -= orders[j]
            j += 1
        if stage == 0:
            state[START] = x
            state.pop(PREDICTIONS, None)
        start = state[START]
        eps = list(state[PREDICTIONS].unbind(0)) if PREDICTIONS in state else []
        t, t_next = ts[j], ts[j + 1]
        point, s = _stage_point(start, t, t_next - t, eps, 1 / 3 if orders[j] == 3 else 0.5)
        eps.append(_eps(model, point, s))
        if stage == 0:  # the solver step's own x0 estimate: what ComfyUI's callback reports
            state[DENOISED] = start - _sigma(t) * eps[0]
        if len(eps) < orders[j]:
            state[PREDICTIONS] = torch.stack(eps)
            return x
        state.pop(PREDICTIONS, None)
        return _solve(start, t, t_next, eps, orders[j], 0.5)


class PIDController:
    """k-diffusion's PID step-size controller over plain floats, its history (h, three inverse errors) kept in
    the sampler state between invocations."""

    def __init__(
        self,
        h: float,
        pcoeff: float,
        icoeff: float,
        dcoeff: float,
        order: float,
        accept_safety: float,
        errs: list[float],
    ) -> None:
        self.h, self.errs, self.accept_safety = h, errs, accept_safety
        self.b1 = (pcoeff + icoeff + dcoeff) / order
        self.b2 = -(pcoeff + 2 * dcoeff) / order
        self.b3 = dcoeff / order

    def propose_step(self, error: Tensor) -> bool:
        inv_error = 1 / (float(error) + 1e-8)
        if not self.errs:
            self.errs = [inv_error, inv_error, inv_error]
        self.errs[0] = inv_error
        factor = 1 + math.atan(self.errs[0] ** self.b1 * self.errs[1] ** self.b2 * self.errs[2] ** self.b3 - 1)
        accept = factor >= self.accept_safety
        if accept:
            self.errs[2], self.errs[1] = self.errs[1], self.errs[0]
        self.h *= factor
        return accept


class DPMAdaptive(Sampler):
    """DPM-Solver-12 / 23 with adaptive steps: one attempted step per invocation, see the module docstring."""

    name = "dpm_adaptive"
    couples_batch = True  # its step-size control takes one error norm over the whole batch

    def __init__(
        self,
        order: int = 3,
        rtol: float = 0.05,
        atol: float = 0.0078,
        h_init: float = 0.05,
        pcoeff: float = 0.0,
        icoeff: float = 1.0,
        dcoeff: float = 0.0,
        accept_safety: float = 0.81,
        eta: float = 0.0,
        s_noise: float = 1.0,
    ) -> None:
        self.order, self.rtol, self.atol, self.h_init = order, rtol, atol, h_init
        self.pcoeff, self.icoeff, self.dcoeff, self.accept_safety = pcoeff, icoeff, dcoeff, accept_safety
        self.eta, self.s_noise = eta, s_noise

    @property
    def noise_kind(self) -> str:  # type: ignore[override]
        return "gaussian" if self.eta else "none"

    def finished(self, i: int, sigmas: Tensor, state: dict[str, Tensor]) -> bool:
        """Once the solver has reached the last non-zero sigma (no step at all when the schedule starts there)."""
        if len(sigmas) <= 1:
            return True
        t_start, t_end = _range(sigmas)
        s = state.get(POSITION, t_start)
        return not bool(s < t_end - 1e-5)

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
        if self.order not in (2, 3):
            raise ValueError("dpm_adaptive: order should be 2 or 3")
        t_start, t_end = _range(sigmas)
        s = state.get(POSITION, t_start)
        x_prev = state.get(PREVIOUS, x)
        pid = PIDController(
            float(state[STEP_SIZE]) if STEP_SIZE in state else abs(self.h_init),
            self.pcoeff,
            self.icoeff,
            self.dcoeff,
            1.5 if self.eta else self.order,
            self.accept_safety,
            state[ERRORS].tolist() if ERRORS in state else [],
        )
        t = torch.minimum(t_end, s + pid.h)
        if self.eta:
            sd, su = ancestral_step(_sigma(s), _sigma(t), self.eta)
            t_ = torch.minimum(t_end, _t(sd))
            su = (_sigma(t) ** 2 - _sigma(t_) ** 2) ** 0.5
        else:
            t_, su = t, 0.0
        r1 = 0.5 if self.order == 2 else 1 / 3
        eps: list[Tensor] = []
        for _ in range(self.order):
            point, at = _stage_point(x, s, t_ - s, eps, r1)
            eps.append(_eps(model, point, at))
        state[DENOISED] = x - _sigma(s) * eps[0]
        x_low = _solve(x, s, t_, eps[: self.order - 1], self.order - 1, r1)
        x_high = _solve(x, s, t_, eps, self.order, 0.5)
        delta = torch.maximum(
            torch.tensor(self.atol), torch.tensor(self.rtol) * torch.maximum(x_low.abs(), x_prev.abs())
        )
        error = torch.linalg.norm((x_low - x_high) / delta) / x.numel() ** 0.5
        if pid.propose_step(error):
            state[PREVIOUS] = x_low
            x = x_high
            if self.eta:
                x = x + su * self.s_noise * noise(_sigma(s), _sigma(t))
            state[POSITION] = t
        state[STEP_SIZE] = torch.tensor(pid.h, dtype=torch.float64)
        state[ERRORS] = torch.tensor(pid.errs, dtype=torch.float64)
        return x
