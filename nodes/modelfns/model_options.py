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

from dataclasses import replace
from typing import Any, Callable

from cluster.refs import ModelRef
from nodes import arch
from nodes.models.components import PLAYGROUND_2_5_LATENT, LatentFormat

SAMPLING = "model_sampling"
FUNCTIONS = "sampler_functions"
NETWORK = "network_patches"   # patches inside the network (nodes.modelfns.network_patches)
COMPILE = "torch_compile"     # TorchCompileModel's backend: the denoise step compiles the loaded network
LATENT = "latent_format"      # a latent format replacing the architecture's (ModelSamplingContinuousEDM)
_SAMPLING_ONLY = (SAMPLING, FUNCTIONS, NETWORK, COMPILE, LATENT)
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
