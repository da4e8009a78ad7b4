"""Sampling patches carried by a MODEL as data: the ModelSampling* nodes' replacement sigma table and
parameterisation, and the guidance functions of RescaleCFG, CFGZeroStar, CFGNorm and Epsilon Scaling.

A patched MODEL is the same ModelRef with two options: `model_sampling` (a model-sampling config, see
nodes.sampling.model_sampling.model_sampling_from_config) and `sampler_functions` (ComfyUI model_options
entries as (hook, function) pairs in the order the nodes applied them; the functions are module-level
dataclasses, so they pickle by name to the executors). The head reads them when it builds a sampling loop;
the weights are the unpatched ones (`weights_ref`), so the executors' weight and layer caches are shared
with the plain MODEL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes import arch
from nodes.models.components import PLAYGROUND_2_5_LATENT, LatentFormat

SAMPLING = "model_sampling"
FUNCTIONS = "sampler_functions"
NETWORK = "network_patches"  # patches inside the network (nodes.modelfns.network_patches)
COMPILE = "torch_compile"  # TorchCompileModel's backend: the denoise step compiles the loaded network
LATENT = "latent_format"  # a latent format replacing the architecture's (ModelSamplingContinuousEDM)
DTYPE = "compute_dtype"  # ModelComputeDtype: the denoise step runs a copy of the network in this dtype
CONDS = "conditionings"  # CONDITIONINGs a guidance function evaluates (PerpNeg's empty prompt)
CFG_OVERRIDES = "cfg_overrides"  # CFGOverride's (sigma_low, sigma_high, cfg) ranges, in the order applied
ROPE = "rope_options"  # ScaleROPE's scales and shifts of the image position ids ((name, value) pairs)
WINDOWS = "context_windows"  # ContextWindowsManual's settings (nodes.sampling.context_windows.ContextWindows)
DIFFSYNTH = "diffsynth"  # QwenImageDiffsynthControlnet's patches (nodes.diffsynth)
USO = "uso_style"  # USOStyleReference's projector and reference states (nodes.uso)
INFINITETALK = "infinitetalk"  # WanInfiniteTalkToVideo's audio patch, windows and motion latent (nodes.infinitetalk)
_SAMPLING_ONLY = (SAMPLING, FUNCTIONS, NETWORK, COMPILE, LATENT, DTYPE, CONDS, CFG_OVERRIDES, ROPE, WINDOWS)
_SAMPLING_ONLY += (DIFFSYNTH, USO, INFINITETALK)
# The latent formats a MODEL patch may select, by name.
LATENT_FORMATS: dict[str, LatentFormat] = {"sdxl_playground_2_5": PLAYGROUND_2_5_LATENT}
# ComfyUI's ModelPatcher: set_model_sampler_cfg_function replaces, the pre/post setters append.
_LISTS = ("sampler_pre_cfg_function", "sampler_post_cfg_function")


def latent_format(model: ModelRef) -> LatentFormat:
    """The latent format sampling uses: the MODEL's patch (ComfyUI's latent_format object patch), else its
    architecture's."""
    patched = model.option(LATENT)
    return LATENT_FORMATS[patched] if patched is not None else arch.latent_format(model.arch)


def sampling_config(model: ModelRef) -> dict[str, Any]:
    """The model-sampling config a sampling loop uses: the MODEL's patch, else its architecture's."""
    patched = model.option(SAMPLING)
    return dict(patched) if patched is not None else arch.sampling_config(model.arch)


def with_sampling(model: ModelRef, config: dict[str, Any]) -> ModelRef:
    """ComfyUI's add_object_patch("model_sampling", ...): a later patch replaces an earlier one."""
    return model.with_option(SAMPLING, tuple(sorted(config.items())))


def with_function(model: ModelRef, hook: str, fn: Callable[[dict], Any]) -> ModelRef:
    """Add a model_options function (hook: sampler_cfg_function, sampler_pre/post_cfg_function)."""
    return model.with_option(FUNCTIONS, tuple(model.option(FUNCTIONS, ())) + ((hook, fn),))


def _digest(value: Any, h: Any) -> None:
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        h.update(f"tensor{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(value, dict):
        for k in sorted(value, key=str):
            h.update(repr(k).encode())
            _digest(value[k], h)
    elif isinstance(value, (list, tuple)):
        h.update(f"seq{len(value)}".encode())
        for v in value:
            _digest(v, h)
    else:
        h.update(repr(value).encode())


@dataclass(frozen=True)
class CarriedConditioning:
    """A CONDITIONING inside a MODEL's options: equal, hashed and keyed (ModelRef.key reads the repr) by a
    digest of its content, so the ref stays a hashable value; the tensors travel as step inputs, not params."""

    digest: str
    conditioning: list = field(repr=False, compare=False, hash=False)

    @classmethod
    def of(cls, conditioning: list) -> CarriedConditioning:
        h = hashlib.sha256()
        _digest(conditioning, h)
        return cls(h.hexdigest(), conditioning)


def with_conditioning(model: ModelRef, name: str, conditioning: list) -> ModelRef:
    """Carry `conditioning` under `name`: the sampling loop flattens it into the step's inputs as `name.*` and
    gives its entries to the guidance functions as model_options[name] (a later patch of a name replaces it)."""
    carried = dict(model.option(CONDS, ()))
    carried[name] = CarriedConditioning.of(conditioning)
    return model.with_option(CONDS, tuple(sorted(carried.items())))


def carried_conditionings(model: ModelRef) -> dict[str, list]:
    """name -> CONDITIONING of the MODEL's carried conditionings."""
    return {name: c.conditioning for name, c in model.option(CONDS, ())}


def sampler_patches(model: ModelRef) -> dict[str, Any]:
    """The model_options a denoise step applies: this module's functions, then those of a node pack's
    MODEL proxy (its `sampler_patches()`), merged as ComfyUI's setters would have."""
    out: dict[str, Any] = {}
    for hook, fn in model.option(FUNCTIONS, ()):
        if hook in _LISTS:
            out[hook] = out.get(hook, []) + [fn]
        else:
            out[hook] = fn
    if model.option(NETWORK):
        out[NETWORK] = tuple(model.option(NETWORK))
    pack = getattr(model, "sampler_patches", None)
    for hook, value in (pack() if pack else {}).items():
        out[hook] = out.get(hook, []) + list(value) if hook in _LISTS else value
    return out


def weights_ref(model: ModelRef) -> ModelRef:
    """The ref the denoise steps load weights for: the MODEL without its sampling-only options."""
    if not any(name in _SAMPLING_ONLY for name, _ in model.options):
        return model
    plain = ModelRef(model.component, model.arch, model.sources, model.digests, model.patches, model.options)
    return replace(plain, options=tuple((k, v) for k, v in model.options if k not in _SAMPLING_ONLY))
