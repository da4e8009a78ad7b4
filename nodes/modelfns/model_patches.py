"""The MODEL patches a denoise step honours (ComfyUI's model_options): `sampler_pre_cfg_function`,
`sampler_cfg_function`, `sampler_post_cfg_function` and `disable_cfg1_optimization`.

They come from node packs (comfy_bridge.packs.proxies.ModelPatcher) as functions; they travel inside
the step's params as a `Patches` value whose pickle imports the defining pack on the executor.
"""

from __future__ import annotations

import importlib
import math
from types import SimpleNamespace
from typing import Any

import torch

# The module whose `dumps_plain(obj) -> bytes` / `loads_plain(bytes) -> obj` carry the patches' functions:
# pack modules are imported by file path, which a plain unpickler cannot do. The packs layer, which makes
# the patches, installs it (`set_codec`); it is named in the pickle so that the executor unpickling one
# imports the codec without this module naming the layer above.
_codec: str | None = None


def set_codec(module: str) -> None:
    """Carry patches with `module`'s dumps_plain / loads_plain (the packs layer calls this on import)."""
    global _codec
    _codec = module


class Patches(dict):
    """model_options entries; pickled so that an executor imports the packs that define them."""

    def __reduce__(self) -> tuple:
        if _codec is None:  # no packs layer in this process: the functions are importable by name
            return Patches, (dict(self),)
        return _load, (_codec, importlib.import_module(_codec).dumps_plain(dict(self)))


def _load(codec: str, data: bytes) -> Patches:
    return Patches(importlib.import_module(codec).loads_plain(data))


def skips_uncond(patches: dict, cfg: float) -> bool:
    """ComfyUI's cfg=1 shortcut: no negative pass unless a patch disabled it."""
    return math.isclose(cfg, 1.0) and not patches.get("disable_cfg1_optimization", False)


def combine(
    patches: dict,
    cond: torch.Tensor,
    uncond: torch.Tensor | None,
    cfg: float,
    x: torch.Tensor,
    sigma: torch.Tensor,
    model_sampling: Any,
    conds: tuple[Any, Any],
    state: dict[str, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Denoised predictions of both sides -> the guided prediction, with the patches applied in ComfyUI's
    order and with its argument names. `state` is the sampler state of the step: functions that keep
    history between steps (APG's momentum) read and write it as `sampler_state`."""
    model = SimpleNamespace(model_sampling=model_sampling)
    if uncond is None and patches:
        uncond = torch.zeros_like(cond)  # what ComfyUI's batch gives for a skipped side
        conds = (conds[0], None)  # and the functions see the skipped side's conds as None
    cond, uncond = pre_cfg(patches, [cond, uncond], cfg, x, sigma, model, list(conds), state)
    if "sampler_cfg_function" in patches:
        args = {
            "cond": x - cond,
            "uncond": x - uncond,
            "cond_scale": cfg,
            "timestep": sigma,
            "input": x,
            "sigma": sigma,
            "cond_denoised": cond,
            "uncond_denoised": uncond,
            "model": model,
            "model_options": patches,
            "input_cond": conds[0],
            "input_uncond": conds[1],
        }
        out = x - patches["sampler_cfg_function"](args)
    elif uncond is None:
        out = cond
    else:
        out = uncond + (cond - uncond) * cfg
    return post_cfg(patches, out, cond, uncond, cfg, x, sigma, model, conds)


def pre_cfg(
    patches: dict,
    conds_out: list,
    cfg: float,
    x: torch.Tensor,
    sigma: torch.Tensor,
    model: Any,
    conds: list,
    state: dict[str, torch.Tensor] | None = None,
) -> list:
    """The sampler_pre_cfg_function chain over the sides' predictions (ComfyUI's conds_out)."""
    for fn in patches.get("sampler_pre_cfg_function", []):
        args = {
            "conds": conds,
            "conds_out": conds_out,
            "cond_scale": cfg,
            "timestep": sigma,
            "input": x,
            "sigma": sigma,
            "model": model,
            "model_options": patches,
        }
        if state is not None:
            args["sampler_state"] = state
        conds_out = fn(args)
    return conds_out


def post_cfg(
    patches: dict,
    out: torch.Tensor,
    cond: torch.Tensor,
    uncond: torch.Tensor | None,
    cfg: float,
    x: torch.Tensor,
    sigma: torch.Tensor,
    model: Any,
    conds: tuple[Any, Any] | list,
    **extra: Any,
) -> torch.Tensor:
    """The sampler_post_cfg_function chain over the guided prediction; `extra` adds guider-specific args."""
    for fn in patches.get("sampler_post_cfg_function", []):
        out = fn(
            {
                "denoised": out,
                "cond": conds[0],
                "uncond": conds[1],
                "cond_scale": cfg,
                "model": model,
                "uncond_denoised": uncond,
                "cond_denoised": cond,
                "sigma": sigma,
                "model_options": patches,
                "input": x,
                **extra,
            }
        )
    return out


def perp_neg(
    positive: torch.Tensor, negative: torch.Tensor, empty: torch.Tensor, neg_scale: float, cfg: float
) -> torch.Tensor:
    """Perp-Neg guidance (Armandpour et al. 2023): guidance relative to the empty prompt, minus the part of the
    negative guidance perpendicular to the positive guidance, scaled by neg_scale."""
    pos, neg = positive - empty, negative - empty
    perpendicular = neg - (torch.mul(neg, pos).sum() / torch.norm(pos) ** 2) * pos
    return empty + cfg * (pos - perpendicular * neg_scale)
