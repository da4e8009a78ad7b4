"""Guidance functions carried on the MODEL: ComfyUI's APG (comfy_extras.nodes_apg), Mahiro (nodes_mahiro),
TCFG (nodes_tcfg), FreSca (nodes_fresca) and LatentApplyOperationCFG (nodes_latent).

Each node adds a module-level dataclass to the MODEL's model_options (nodes.modelfns.model_options), so the
function pickles by name to the executors and runs inside every denoise step (nodes.modelfns.model_patches).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from cluster.refs import ModelRef
from nodes.inputs import require_model
from nodes.library.cfg import POST_CFG
from nodes.modelfns.model_options import with_function

PRE_CFG = "sampler_pre_cfg_function"
# APG's running average and the sigma it was last updated at, kept in the sampler state between steps.
APG_AVERAGE, APG_SIGMA = "patch.apg.running_avg", "patch.apg.prev_sigma"


def _both_sides(args: dict) -> bool:
    """Whether the negative side was evaluated (not skipped by the cfg = 1 shortcut)."""
    return len(args["conds_out"]) > 1 and None not in args["conds"][:2]


def project(v0: torch.Tensor, v1: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """v0's components parallel and orthogonal to v1, per item over the last three dimensions."""
    v1 = F.normalize(v1, dim=[-1, -2, -3])
    parallel = (v0 * v1).sum(dim=[-1, -2, -3], keepdim=True) * v1
    return parallel, v0 - parallel


@dataclass(frozen=True)
class ApgFunction:
    """Adaptive Projected Guidance (Sadat et al. 2024): the guidance difference, optionally averaged with
    momentum over steps and capped in norm, split into its parts parallel and orthogonal to the positive
    prediction; the parallel part is scaled by eta. Returned as a positive side that plain CFG turns into
    uncond + cfg * (modified guidance) + (cond - uncond)."""

    eta: float
    norm_threshold: float
    momentum: float

    def __call__(self, args: dict) -> list:
        conds_out = args["conds_out"]
        if len(conds_out) == 1:
            return conds_out
        cond, uncond, scale = conds_out[0], conds_out[1], args["cond_scale"]
        guidance = cond - uncond
        if self.momentum != 0:
            guidance = self._average(args, guidance)
        if self.norm_threshold > 0:
            norm = guidance.norm(p=2, dim=[-1, -2, -3], keepdim=True)
            guidance = guidance * torch.minimum(torch.ones_like(norm), self.norm_threshold / norm)
        parallel, orthogonal = project(guidance, cond)
        modified = orthogonal + self.eta * parallel
        return [(uncond + modified) + (cond - uncond) / scale] + list(conds_out[1:])

    def _average(self, args: dict, guidance: torch.Tensor) -> torch.Tensor:
        """momentum * previous average + this guidance; restarted when sigma rises (a new sampling run).
        The average lives in the sampler state, so it follows the steps from executor to executor."""
        state, sigma = args["sampler_state"], args["sigma"].reshape(-1)[:1]
        previous = state.get(APG_SIGMA)
        if previous is not None and bool(sigma > previous):
            state.pop(APG_AVERAGE, None)
        state[APG_SIGMA] = sigma.clone()
        average = state.get(APG_AVERAGE)
        average = guidance if average is None else self.momentum * average + guidance
        state[APG_AVERAGE] = average
        return average


@dataclass(frozen=True)
class MahiroFunction:
    """Mixes the CFG result with the positive prediction times cfg, weighting the CFG result by how similar
    (cosine of signed square roots) the negative leap is to the mean of both."""

    def __call__(self, args: dict) -> torch.Tensor:
        scale, cfg = args["cond_scale"], args["denoised"]
        leap = args["cond_denoised"] * scale
        u_leap = args["uncond_denoised"] * scale
        merge = (leap + cfg) / 2
        norm_u = torch.sqrt(u_leap.abs()) * u_leap.sign()
        norm_m = torch.sqrt(merge.abs()) * merge.sign()
        similarity = 2 * (F.cosine_similarity(norm_u, norm_m).mean() + 1)
        return (similarity * cfg + (4 - similarity) * leap) / 4


def tangential_damping(cond_score: torch.Tensor, uncond_score: torch.Tensor) -> torch.Tensor:
    """The negative score projected onto the first right-singular vector of [uncond; cond] (TCFG,
    arXiv 2503.18137): its components tangential to the shared direction are dropped."""
    n = cond_score.shape[0]
    cond_flat = cond_score.reshape(n, 1, -1).float()
    uncond_flat = uncond_score.reshape(n, 1, -1).float()
    matrix = torch.cat((uncond_flat, cond_flat), dim=1)
    try:
        _, _, vh = torch.linalg.svd(matrix, full_matrices=False)
    except RuntimeError:  # some accelerator SVDs fail on ill-conditioned input; the CPU one does not
        _, _, vh = torch.linalg.svd(matrix.cpu(), full_matrices=False)
    v1 = vh[:, 0:1, :].to(uncond_flat.device)
    return ((uncond_flat @ v1.transpose(-2, -1)) * v1).reshape_as(uncond_score).to(uncond_score.dtype)


@dataclass(frozen=True)
class TcfgFunction:
    """Replaces the negative prediction by its tangentially damped version (in score space, x - denoised)."""

    def __call__(self, args: dict) -> list:
        conds_out = args["conds_out"]
        if not _both_sides(args):
            return conds_out
        x, cond, uncond = args["input"], conds_out[0], conds_out[1]
        return [cond, x - tangential_damping(x - cond, x - uncond)] + list(conds_out[2:])


def fourier_filter(x: torch.Tensor, scale_low: float, scale_high: float, freq_cutoff: int) -> torch.Tensor:
    """Scales x's spatial frequencies: those within freq_cutoff of the centre of the shifted spectrum by
    scale_low, the rest by scale_high (computed in float32, returned in x's dtype)."""
    dtype = x.dtype
    freq = torch.fft.fftshift(torch.fft.fftn(x.to(torch.float32), dim=(-2, -1)), dim=(-2, -1))
    mask = torch.full(freq.shape, float(scale_high), device=x.device)
    low = mask
    for dim in range(2, freq.ndim):
        centre = freq.shape[dim] // 2
        half = min(freq_cutoff, centre)
        low = low.narrow(dim, centre - half, half * 2)
    low[:] = scale_low
    freq = torch.fft.ifftshift(freq * mask, dim=(-2, -1))
    return torch.fft.ifftn(freq, dim=(-2, -1)).real.to(dtype)


@dataclass(frozen=True)
class FreScaFunction:
    """Frequency-scaled guidance (FreSca): the guidance difference filtered by fourier_filter."""

    scale_low: float
    scale_high: float
    freq_cutoff: int

    def __call__(self, args: dict) -> list:
        conds_out = args["conds_out"]
        if not _both_sides(args):
            return conds_out
        cond, uncond = conds_out[0], conds_out[1]
        filtered = fourier_filter(cond - uncond, self.scale_low, self.scale_high, self.freq_cutoff)
        return [filtered + uncond, uncond] + list(conds_out[2:])


@dataclass(frozen=True)
class LatentOperationCfgFunction:
    """A LATENT_OPERATION applied to the guidance difference (or to the positive side alone)."""

    operation: Callable[..., torch.Tensor]

    def __call__(self, args: dict) -> list:
        conds_out = list(args["conds_out"])
        if len(conds_out) == 2:
            conds_out[0] = self.operation(latent=conds_out[0] - conds_out[1]) + conds_out[1]
        else:
            conds_out[0] = self.operation(latent=conds_out[0])
        return conds_out


class _Patch:
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"


class APG(_Patch):
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_apg"
    CATEGORY = "sampling/custom_sampling"
    DESCRIPTION = (
        "Adaptive Projected Guidance: damps the part of the guidance parallel to the positive "
        "prediction (less oversaturation at high cfg)."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "eta": (
                    "FLOAT",
                    {
                        "default": 1.0,
                        "min": -10.0,
                        "max": 10.0,
                        "step": 0.01,
                        "tooltip": "Weight of the guidance's parallel part (1: plain CFG).",
                    },
                ),
                "norm_threshold": (
                    "FLOAT",
                    {
                        "default": 5.0,
                        "min": 0.0,
                        "max": 50.0,
                        "step": 0.1,
                        "tooltip": "Largest norm of the guidance difference (0: no cap).",
                    },
                ),
                "momentum": (
                    "FLOAT",
                    {
                        "default": 0.0,
                        "min": -5.0,
                        "max": 1.0,
                        "step": 0.01,
                        "tooltip": "Weight of the previous steps' guidance (0: none).",
                    },
                ),
            }
        }

    def patch(self, model: Any, eta: float, norm_threshold: float, momentum: float) -> tuple[ModelRef]:
        return (
            with_function(
                require_model(model), PRE_CFG, ApgFunction(float(eta), float(norm_threshold), float(momentum))
            ),
        )


class Mahiro(_Patch):
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_mahiro"
    RETURN_NAMES = ("patched_model",)
    CATEGORY = "_for_testing"
    EXPERIMENTAL = True
    DESCRIPTION = "Guidance that follows the positive prompt's direction more than its distance from the negative."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL", {})}}

    def patch(self, model: Any) -> tuple[ModelRef]:
        return (with_function(require_model(model), POST_CFG, MahiroFunction()),)


class TCFG(_Patch):
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_tcfg"
    RETURN_NAMES = ("patched_model",)
    CATEGORY = "advanced/guidance"
    DESCRIPTION = "Tangential Damping CFG: aligns the negative prediction with the positive one before CFG."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL", {})}}

    def patch(self, model: Any) -> tuple[ModelRef]:
        return (with_function(require_model(model), PRE_CFG, TcfgFunction()),)


class FreSca(_Patch):
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_fresca"
    CATEGORY = "_for_testing"
    EXPERIMENTAL = True
    DESCRIPTION = "Scales the guidance's low and high spatial frequencies separately."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "scale_low": (
                    "FLOAT",
                    {"default": 1.0, "min": 0, "max": 10, "step": 0.01, "tooltip": "Factor for the low frequencies."},
                ),
                "scale_high": (
                    "FLOAT",
                    {"default": 1.25, "min": 0, "max": 10, "step": 0.01, "tooltip": "Factor for the high frequencies."},
                ),
                "freq_cutoff": (
                    "INT",
                    {
                        "default": 20,
                        "min": 1,
                        "max": 10000,
                        "step": 1,
                        "tooltip": "How many frequency indices around the centre count as low.",
                    },
                ),
            }
        }

    def patch(self, model: Any, scale_low: float, scale_high: float, freq_cutoff: int) -> tuple[ModelRef]:
        return (
            with_function(
                require_model(model), PRE_CFG, FreScaFunction(float(scale_low), float(scale_high), int(freq_cutoff))
            ),
        )


class LatentApplyOperationCFG(_Patch):
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_latent"
    CATEGORY = "latent/advanced/operations"
    EXPERIMENTAL = True
    DESCRIPTION = "Applies a latent operation to the guidance (positive minus negative) in every step."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL", {}), "operation": ("LATENT_OPERATION", {})}}

    def patch(self, model: Any, operation: Any) -> tuple[ModelRef]:
        if not callable(operation):
            raise ValueError(f"operation: expected a LATENT_OPERATION, got {type(operation).__name__}")
        return (with_function(require_model(model), PRE_CFG, LatentOperationCfgFunction(operation)),)


NODE_CLASS_MAPPINGS = {cls.__name__: cls for cls in (APG, Mahiro, TCFG, FreSca, LatentApplyOperationCFG)}
NODE_DISPLAY_NAME_MAPPINGS = {
    "APG": "Adaptive Projected Guidance",
    "Mahiro": "Mahiro is so cute that she deserves a better guidance function!! (。・ω・。)",
    "TCFG": "Tangential Damping CFG",
    "FreSca": "FreSca",
}
