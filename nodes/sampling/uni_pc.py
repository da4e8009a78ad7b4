"""UniPC (Zhao et al. 2023, arXiv 2302.04867): multistep predictor-corrector on the data prediction, B(h) variants.

As in ComfyUI, the solver runs in VP scale: x is divided by sqrt(1 + sigma_0^2) on the first step, a final
sigma of 0 is replaced by 0.001, and the last step divides by alpha(0.001). Between steps x is therefore the
VP-scaled latent; previews should use state["denoised"]. Each step makes exactly one model call: step 0
evaluates the model at sigma_0 and leaves x in place; step k moves x to sigma_k and evaluates the corrector
there; the last step also takes the final predictor-only step to sigma_N.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .model_sampling import ModelSampling
from .noise import NoiseSampler
from .sampler_base import DENOISED, Model, Sampler, append_dims


def _log_alpha(s: Tensor) -> Tensor:
    return 0.5 * torch.log(1 / ((s * s) + 1))


def _alpha(s: Tensor) -> Tensor:
    return torch.exp(_log_alpha(s))


def _std(s: Tensor) -> Tensor:
    return torch.sqrt(1.0 - torch.exp(2.0 * _log_alpha(s)))


def _lambda(s: Tensor) -> Tensor:
    la = _log_alpha(s)
    return la - 0.5 * torch.log(1.0 - torch.exp(2.0 * la))


def _data_prediction(model: Model, x_vp: Tensor, t: Tensor) -> Tensor:
    """x0 from the VP-scaled latent: the model sees the VE latent x_vp * sqrt(1 + sigma^2)."""
    s = append_dims(t, x_vp.ndim)
    x_ve = x_vp * ((s**2 + 1.0) ** 0.5)
    eps = (x_ve - model(x_ve, t)) / s
    return (x_vp - append_dims(_std(t), x_vp.ndim) * eps) / append_dims(_alpha(t), x_vp.ndim)


class UniPC(Sampler):
    name = "uni_pc"

    def __init__(self, variant: str = "bh1", name: str | None = None) -> None:
        if variant not in ("bh1", "bh2"):
            raise ValueError("variant must be 'bh1' or 'bh2'")
        self.variant = variant
        self.name = name or self.name

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
        ts = sigmas.clone()
        if sigmas[-1] == 0:
            ts[-1] = 0.001
        order = min(3, n - 1)
        batch = x.shape[0]
        models = list(state["unipc_m"].unbind(0)) if "unipc_m" in state else []
        times = list(state["unipc_t"].unbind(0)) if "unipc_t" in state else []

        if i == 0:
            x = x / torch.sqrt(1.0 + ts[0] ** 2.0)
            vec = ts[0].expand(batch)
            models, times = [_data_prediction(model, x, vec)], [vec]
        elif i < order:
            vec = ts[i].expand(batch)
            x, m = self._update(model, x, models, times, vec, i, use_corrector=True)
            models.append(m)
            times.append(vec)
        else:
            targets = [i, n] if i == n - 1 else [i]
            for s in targets:
                vec = ts[s].expand(batch)
                x, m = self._update(model, x, models, times, vec, min(order, n + 1 - s), use_corrector=s != n)
                models, times = models[1:] + models[-1:], times[1:] + [vec]
                if s < n:
                    models[-1] = m

        state["unipc_m"], state["unipc_t"] = torch.stack(models), torch.stack(times)
        state[DENOISED] = models[-1]
        if i == n - 1:
            x = x / _alpha(ts[-1])
        return x

    def _update(
        self,
        model: Model,
        x: Tensor,
        models: list[Tensor],
        times: list[Tensor],
        t: Tensor,
        order: int,
        use_corrector: bool,
    ) -> tuple[Tensor, Tensor | None]:
        """One B(h) predictor (and optionally corrector) step from times[-1] to t, in data-prediction form."""
        ndim = x.dim()
        t_0, m_0 = times[-1], models[-1]
        lam_0, lam_t = _lambda(t_0), _lambda(t)
        sigma_0, sigma_t = _std(t_0), _std(t)
        alpha_t = torch.exp(_log_alpha(t))
        h = lam_t - lam_0

        rks: list[float] = []
        d1s: list[Tensor] = []
        for k in range(1, order):
            rk = ((_lambda(times[-(k + 1)]) - lam_0) / h)[0]
            rks.append(float(rk))
            d1s.append((models[-(k + 1)] - m_0) / rk)
        rk_t = torch.tensor(rks + [1.0], device=x.device, dtype=x.dtype)

        hh = -h[0]
        h_phi_1 = torch.expm1(hh)
        h_phi_k = h_phi_1 / hh - 1
        b_h = hh if self.variant == "bh1" else torch.expm1(hh)
        rows, b = [], []
        factorial = 1
        for k in range(1, order + 1):
            rows.append(torch.pow(rk_t, k - 1))
            b.append(float(h_phi_k * factorial / b_h))
            factorial *= k + 1
            h_phi_k = h_phi_k / hh - 1 / factorial
        r_mat = torch.stack(rows)
        b_t = torch.tensor(b, device=x.device, dtype=x.dtype)

        x_lin = append_dims(sigma_t / sigma_0, ndim) * x - append_dims(alpha_t * h_phi_1, ndim) * m_0
        scale = append_dims(alpha_t * b_h, ndim)
        d1 = torch.stack(d1s, dim=1) if d1s else None
        x_t = x_lin
        if d1 is not None:
            rhos_p = x.new_tensor([0.5]) if order == 2 else torch.linalg.solve(r_mat[:-1, :-1], b_t[:-1])
            x_t = x_lin - scale * torch.tensordot(d1, rhos_p, dims=([1], [0]))
        if not use_corrector:
            return x_t, None
        rhos_c = x.new_tensor([0.5]) if order == 1 else torch.linalg.solve(r_mat, b_t)
        m_t = _data_prediction(model, x_t, t)
        corr = rhos_c[-1] * (m_t - m_0)
        if d1 is not None:
            corr = torch.tensordot(d1, rhos_c[:-1], dims=([1], [0])) + corr
        return x_lin - scale * corr, m_t
