"""`comfy.samplers`: sampler and scheduler names, and the scheduler registry packs extend.

`SCHEDULER_NAMES` / `KSampler.SCHEDULERS` and `SAMPLER_NAMES` / `KSampler.SAMPLERS` are the very lists the
core KSampler offers, and `SCHEDULER_HANDLERS` writes through to the schedules the core KSampler
computes sigmas from, so a scheduler a pack adds here is offered by KSampler and used by it.
`ksampler` / `sampler_object` give SAMPLER values our SamplerCustom nodes take (a KSAMPLER that is also our
SamplerChoice); `KSAMPLER.sample` runs its k-diffusion function in-process around a model wrapper whose
model_sampling is ours, as ComfyUI's does. What needs ComfyUI's BaseModel (sampling_function,
calc_cond_batch) or its guider loop raises UnsupportedFeature: sampling runs as denoise steps on the executors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any, NamedTuple

import torch

from comfy_bridge.compat.comfy.k_diffusion import sampling as k_diffusion_sampling
from comfy_bridge.packs.origin import UnsupportedFeature
from nodes.ksampler import SamplerChoice
from nodes.modelfns.network_patches import CALC_COND, HOOKS, with_extra
from nodes.sampling import schedules
from nodes.sampling.model_sampling import ModelSampling
from nodes.sampling.samplers import SAMPLER_NAMES, configured_sampler

# ComfyUI's KSAMPLER_NAMES: the k-diffusion samplers; SAMPLER_NAMES adds ddim and the UniPC pair.
KSAMPLER_NAMES = [n for n in SAMPLER_NAMES if n not in ("ddim", "uni_pc", "uni_pc_bh2")]
SCHEDULER_NAMES = schedules.SCHEDULER_NAMES
DISCARD_PENULTIMATE_SIGMA_SAMPLERS = set(schedules.DISCARD_PENULTIMATE_SIGMA_SAMPLERS)


class SchedulerHandler(NamedTuple):
    """`handler(model_sampling, steps)` when use_ms, else `handler(n, sigma_min, sigma_max)`."""

    handler: Callable[..., torch.Tensor]
    use_ms: bool = True


def _as_schedule(h: SchedulerHandler) -> Callable[[Any, int], torch.Tensor]:
    if h.use_ms:
        return h.handler
    return lambda ms, steps: h.handler(n=steps, sigma_min=float(ms.sigma_min), sigma_max=float(ms.sigma_max))


class _SchedulerHandlers(MutableMapping):
    """A view of the core schedules as SchedulerHandlers; entries set here become core schedules."""

    def __getitem__(self, name: str) -> SchedulerHandler:
        fn = schedules.SCHEDULERS[name]
        return getattr(fn, "_handler", None) or SchedulerHandler(fn, True)

    def __setitem__(self, name: str, handler: SchedulerHandler | Callable) -> None:
        if not isinstance(handler, SchedulerHandler):
            handler = SchedulerHandler(handler, True)
        fn = _as_schedule(handler)
        try:
            fn._handler = handler  # type: ignore[attr-defined]
        except AttributeError:
            pass
        schedules.SCHEDULERS[name] = fn

    def __delitem__(self, name: str) -> None:
        del schedules.SCHEDULERS[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(schedules.SCHEDULERS))

    def __len__(self) -> int:
        return len(schedules.SCHEDULERS)


SCHEDULER_HANDLERS = _SchedulerHandlers()


def calculate_sigmas(model_sampling: Any, scheduler_name: str, steps: int) -> torch.Tensor:
    return schedules.calculate_sigmas(model_sampling, scheduler_name, steps)


def simple_scheduler(model_sampling: ModelSampling, steps: int) -> torch.Tensor:
    return schedules.simple(model_sampling, steps)


def ddim_scheduler(model_sampling: ModelSampling, steps: int) -> torch.Tensor:
    return schedules.ddim_uniform(model_sampling, steps)


def normal_scheduler(model_sampling: ModelSampling, steps: int, sgm: bool = False, floor: bool = False) -> torch.Tensor:
    return schedules.normal(model_sampling, steps, sgm)  # ComfyUI ignores `floor` too


def beta_scheduler(model_sampling: ModelSampling, steps: int, alpha: float = 0.6, beta: float = 0.6) -> torch.Tensor:
    return schedules.beta(model_sampling, steps, alpha, beta)


def linear_quadratic_schedule(
    model_sampling: ModelSampling, steps: int, threshold_noise: float = 0.025, linear_steps: int | None = None
) -> torch.Tensor:
    return schedules.linear_quadratic(model_sampling, steps, threshold_noise, linear_steps)


def kl_optimal_scheduler(n: int, sigma_min: float, sigma_max: float) -> torch.Tensor:
    return schedules.kl_optimal(n, sigma_min, sigma_max)


def _our_model_sampling(model_wrap: Any, what: str) -> ModelSampling:
    ms = getattr(getattr(model_wrap, "inner_model", None), "model_sampling", None)
    if not isinstance(ms, ModelSampling):
        raise UnsupportedFeature(
            what,
            "it needs a model whose inner_model.model_sampling is this backend's "
            "(ComfyUI's BaseModel does not run here)",
        )
    return ms


def cfg_function(
    model: Any,
    cond_pred: torch.Tensor,
    uncond_pred: torch.Tensor,
    cond_scale: float,
    x: torch.Tensor,
    timestep: torch.Tensor,
    model_options: dict | None = None,
    cond: Any = None,
    uncond: Any = None,
) -> torch.Tensor:
    """CFG of two predictions with the model options' sampler_cfg_function and post-CFG functions (ComfyUI's
    argument dicts: `cond` / `uncond` there are x minus the predictions)."""
    model_options = model_options or {}
    if "sampler_cfg_function" in model_options:
        args = {
            "cond": x - cond_pred,
            "uncond": x - uncond_pred,
            "cond_scale": cond_scale,
            "timestep": timestep,
            "input": x,
            "sigma": timestep,
            "cond_denoised": cond_pred,
            "uncond_denoised": uncond_pred,
            "model": model,
            "model_options": model_options,
            "input_cond": cond,
            "input_uncond": uncond,
        }
        result = x - model_options["sampler_cfg_function"](args)
    else:
        result = uncond_pred + (cond_pred - uncond_pred) * cond_scale
    for fn in model_options.get("sampler_post_cfg_function", []):
        result = fn(
            {
                "denoised": result,
                "cond": cond,
                "uncond": uncond,
                "cond_scale": cond_scale,
                "model": model,
                "uncond_denoised": uncond_pred,
                "cond_denoised": cond_pred,
                "sigma": timestep,
                "model_options": model_options,
                "input": x,
            }
        )
    return result


# ComfyUI's transformer_options["patches"] kinds the denoise step's networks run (nodes.modelfns.network_patches).
_PATCH_KINDS = tuple(h for h in HOOKS if not h.endswith("_replace"))


def _network_entries(model_options: dict) -> tuple:
    """The network entries of ComfyUI's transformer_options patches in `model_options` (what a guidance function
    adds with set_model_options_patch_replace / set_model_options_*_patch before calc_cond_batch): the
    attn1 / attn2 / dit replacements by block, and patch lists of the kinds the networks run; others refuse."""
    options = model_options.get("transformer_options") or {}
    entries = []
    for kind, by_block in (options.get("patches_replace") or {}).items():
        if f"{kind}_replace" not in HOOKS:
            raise UnsupportedFeature(f"comfy.samplers.calc_cond_batch with a {kind!r} replacement", _NETWORK_WHY)
        entries += [(f"{kind}_replace", block, fn) for block, fn in by_block.items()]
    for kind, fns in (options.get("patches") or {}).items():
        if kind not in _PATCH_KINDS:
            raise UnsupportedFeature(f"comfy.samplers.calc_cond_batch with a {kind!r} patch", _NETWORK_WHY)
        entries += [(kind, None, fn) for fn in fns]
    return tuple(entries)


_NETWORK_WHY = "the denoise step's networks run ComfyUI's attention and block patch points: " + ", ".join(HOOKS)


def calc_cond_batch(
    model: Any, conds: list, x_in: torch.Tensor, timestep: torch.Tensor, model_options: dict
) -> list[torch.Tensor]:
    """Each cond's denoised prediction at (x_in, timestep) under `model_options` (with the transformer patches
    they add), from a guidance function inside a denoise step: model_options is the one the step gave it, which
    carries the step's evaluation (as PAG and SAG use it); a None cond gives zeros, as in ComfyUI. Outside a
    sampling step there is no in-process model to run."""
    evaluate = (model_options or {}).get(CALC_COND)
    if evaluate is None:
        raise UnsupportedFeature(
            "comfy.samplers.calc_cond_batch outside a sampling step's guidance functions",
            "the diffusion model runs inside the denoise steps on the executors; call it from a sampler CFG "
            "function with the model_options it was given",
        )
    outs = evaluate(model, conds, x_in, timestep, with_extra(model_options, _network_entries(model_options)))
    return [torch.zeros_like(x_in) if out is None else out for out in outs]


def calc_cond_uncond_batch(
    model: Any, cond: Any, uncond: Any, x_in: torch.Tensor, timestep: torch.Tensor, model_options: dict
) -> tuple:
    """ComfyUI's older two-cond form of calc_cond_batch: (cond prediction, uncond prediction)."""
    return tuple(calc_cond_batch(model, [cond, uncond], x_in, timestep, model_options))


def sampling_function(
    model: Any,
    x: torch.Tensor,
    timestep: torch.Tensor,
    uncond: Any,
    cond: Any,
    cond_scale: float,
    model_options: dict | None = None,
    seed: int | None = None,
) -> torch.Tensor:
    raise UnsupportedFeature(
        "comfy.samplers.sampling_function", "it runs ComfyUI's BaseModel on the conditioning, which does not run here"
    )


class KSamplerX0Inpaint:
    """A model wrapper's x0 prediction with the latent kept outside the denoise mask (ComfyUI's inpainting
    wrapper), for a wrapper whose inner_model.model_sampling is ours."""

    def __init__(self, model: Any, sigmas: torch.Tensor) -> None:
        self.inner_model, self.sigmas = model, sigmas
        self.noise: torch.Tensor | None = None
        self.latent_image: torch.Tensor | None = None

    def __call__(
        self,
        x: torch.Tensor,
        sigma: torch.Tensor,
        denoise_mask: torch.Tensor | None = None,
        model_options: dict | None = None,
        seed: int | None = None,
    ) -> torch.Tensor:
        model_options = model_options or {}
        if denoise_mask is not None:
            if "denoise_mask_function" in model_options:
                denoise_mask = model_options["denoise_mask_function"](
                    sigma, denoise_mask, extra_options={"model": self.inner_model, "sigmas": self.sigmas}
                )
            ms = _our_model_sampling(self.inner_model, "comfy.samplers.KSamplerX0Inpaint with a denoise mask")
            kept = ms.noise_scaling(sigma.reshape([sigma.shape[0]] + [1] * (x.ndim - 1)), self.noise, self.latent_image)
            x = x * denoise_mask + kept * (1.0 - denoise_mask)
        out = self.inner_model(x, sigma, model_options=model_options, seed=seed)
        if denoise_mask is not None:
            out = out * denoise_mask + self.latent_image * (1.0 - denoise_mask)
        return out


class Sampler:
    def sample(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def max_denoise(self, model_wrap: Any, sigmas: torch.Tensor) -> bool:
        max_sigma = float(model_wrap.inner_model.model_sampling.sigma_max)
        sigma = float(sigmas[0])
        return math.isclose(max_sigma, sigma, rel_tol=1e-05) or sigma > max_sigma


class KSAMPLER(Sampler):
    """A k-diffusion sampler function with its options. `sample` runs it in-process, as ComfyUI's does: noise
    scaled to sigmas[0], the function over the inpainting wrapper, the result scaled back."""

    def __init__(
        self,
        sampler_function: Callable[..., torch.Tensor],
        extra_options: dict | None = None,
        inpaint_options: dict | None = None,
    ) -> None:
        self.sampler_function = sampler_function
        self.extra_options = extra_options or {}
        self.inpaint_options = inpaint_options or {}

    def sample(
        self,
        model_wrap: Any,
        sigmas: torch.Tensor,
        extra_args: dict,
        callback: Callable | None,
        noise: torch.Tensor,
        latent_image: torch.Tensor | None = None,
        denoise_mask: torch.Tensor | None = None,
        disable_pbar: bool = False,
    ) -> torch.Tensor:
        ms = _our_model_sampling(model_wrap, "comfy.samplers.KSAMPLER.sample")
        if latent_image is None:
            latent_image = torch.zeros_like(noise)
        extra_args["denoise_mask"] = denoise_mask
        model_k = KSamplerX0Inpaint(model_wrap, sigmas)
        model_k.latent_image = latent_image
        if self.inpaint_options.get("random", False):
            generator = torch.manual_seed(extra_args.get("seed", 41) + 1)
            model_k.noise = torch.randn(noise.shape, generator=generator).to(noise)
        else:
            model_k.noise = noise
        x = ms.noise_scaling(sigmas[0], noise, latent_image, self.max_denoise(model_wrap, sigmas))
        steps = len(sigmas) - 1
        k_callback = None if callback is None else (lambda d: callback(d["i"], d["denoised"], d["x"], steps))
        samples = self.sampler_function(
            model_k, x, sigmas, extra_args=extra_args, callback=k_callback, disable=disable_pbar, **self.extra_options
        )
        return ms.inverse_noise_scaling(sigmas[-1], samples)


def _over_sigmas(name: str) -> Callable[..., torch.Tensor]:
    """dpm_fast / dpm_adaptive as sampler functions over a schedule (ComfyUI's wrappers): from its first sigma to
    its last non-zero one, dpm_fast in as many model evaluations as the schedule has steps."""

    def run(
        model: Any,
        noise: torch.Tensor,
        sigmas: torch.Tensor,
        extra_args: dict | None = None,
        callback: Callable | None = None,
        disable: bool | None = None,
        **options: Any,
    ) -> torch.Tensor:
        if len(sigmas) <= 1:
            return noise
        sigma_min = sigmas[-1] if sigmas[-1] != 0 else sigmas[-2]
        if name == "dpm_fast":
            return k_diffusion_sampling.sample_dpm_fast(
                model,
                noise,
                sigma_min,
                sigmas[0],
                len(sigmas) - 1,
                extra_args=extra_args,
                callback=callback,
                disable=disable,
            )
        return k_diffusion_sampling.sample_dpm_adaptive(
            model, noise, sigma_min, sigmas[0], extra_args=extra_args, callback=callback, disable=disable, **options
        )

    return run


class _NamedKSAMPLER(SamplerChoice, KSAMPLER):
    """A KSAMPLER for one of our samplers by name: also the SamplerChoice our SamplerCustom nodes take."""

    @property
    def sampler_function(self) -> Callable[..., torch.Tensor]:  # type: ignore[override]
        if self.name in ("dpm_fast", "dpm_adaptive"):
            return _over_sigmas(self.name)
        fn = getattr(k_diffusion_sampling, f"sample_{'euler' if self.name == 'ddim' else self.name}", None)
        if fn is None:
            raise UnsupportedFeature(
                f"comfy.samplers.sampler_object({self.name!r}).sampler_function",
                "this sampler runs only as denoise steps on the executors",
            )
        return fn

    @property
    def extra_options(self) -> dict:  # type: ignore[override]
        return dict(self.options)

    @property
    def inpaint_options(self) -> dict:  # type: ignore[override]
        return {"random": True} if self.name == "ddim" else {}


def ksampler(sampler_name: str, extra_options: dict | None = None, inpaint_options: dict | None = None) -> KSAMPLER:
    """The named sampler with options: a SAMPLER our nodes take where our sampler has those settings, else a
    plain KSAMPLER of its function (which only runs in-process)."""
    if sampler_name not in SAMPLER_NAMES:
        raise ValueError(f"unknown sampler {sampler_name!r}")
    extra_options = extra_options or {}
    try:
        configured_sampler(sampler_name, extra_options)
    except (ValueError, TypeError):
        return KSAMPLER(_NamedKSAMPLER(sampler_name).sampler_function, extra_options, inpaint_options)
    return _NamedKSAMPLER(sampler_name, tuple(extra_options.items()))


def sampler_object(name: str) -> KSAMPLER:
    return ksampler(name)


def sample(
    model: Any,
    noise: torch.Tensor,
    positive: list,
    negative: list,
    cfg: float,
    device: Any,
    sampler: Any,
    sigmas: torch.Tensor,
    model_options: dict | None = None,
    latent_image: torch.Tensor | None = None,
    denoise_mask: torch.Tensor | None = None,
    callback: Callable | None = None,
    disable_pbar: bool = False,
    seed: int | None = None,
) -> torch.Tensor:
    """A CFG-guided run of `sampler` over `sigmas` from `noise`: the sampled latent (comfy.sampling_run; the
    MODEL's own model_options apply, `device` is the executors' choice)."""
    from comfy_bridge.compat.comfy.sampling_run import run

    if latent_image is None:
        latent_image = torch.zeros_like(noise)
    return run(
        model, noise, cfg, sampler, sigmas, positive, negative, latent_image, denoise_mask, seed, callback, disable_pbar
    )


class CFGGuider:
    """Present so packs can subclass it at import; guiding a sampling run here is not supported."""

    def __init__(self, model_patcher: Any) -> None:
        self.model_patcher = model_patcher
        self.model_options = getattr(model_patcher, "model_options", {})
        self.conds: dict = {}
        self.cfg = 1.0

    def set_conds(self, positive: Any, negative: Any) -> None:
        self.inner_set_conds({"positive": positive, "negative": negative})

    def inner_set_conds(self, conds: dict) -> None:
        """Keep named conditionings (subclasses with other conds call this, as in ComfyUI)."""
        self.conds = dict(conds)

    def set_cfg(self, cfg: float) -> None:
        self.cfg = cfg

    def sample(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedFeature("comfy.samplers.CFGGuider.sample", "use nodes.common_ksampler")


class KSampler:
    SCHEDULERS = SCHEDULER_NAMES
    SAMPLERS = SAMPLER_NAMES
    DISCARD_PENULTIMATE_SIGMA_SAMPLERS = DISCARD_PENULTIMATE_SIGMA_SAMPLERS

    def __init__(
        self,
        model: Any,
        steps: int,
        device: Any = None,
        sampler: str | None = None,
        scheduler: str | None = None,
        denoise: float | None = None,
        model_options: dict | None = None,
    ):
        from nodes import arch
        from nodes.sampling.model_sampling import model_sampling_from_config

        self.model, self.steps, self.sampler, self.scheduler = model, steps, sampler, scheduler
        self.denoise = denoise
        ms = model_sampling_from_config(arch.sampling_config(model.arch))
        self.sigmas = schedules.ksampler_sigmas(ms, scheduler, steps, denoise, sampler)

    def sample(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedFeature("comfy.samplers.KSampler.sample", "use nodes.common_ksampler")


# ---- cond batching (packs with their own CFG loop: area / mask weights and batching of prepared conds) ----


class CondObj(NamedTuple):
    """One prepared cond entry for one model call (ComfyUI's `cond_obj`)."""

    input_x: torch.Tensor
    mult: torch.Tensor
    conditioning: dict
    area: list | None
    control: Any
    patches: dict | None
    uuid: Any
    hooks: Any


def process_conds(
    model: Any,
    noise: torch.Tensor,
    conds: dict,
    device: Any,
    latent_image: Any = None,
    denoise_mask: Any = None,
    seed: Any = None,
    latent_shapes: Any = None,
) -> dict:
    """ComfyUI's preparation of conds for its in-process model (areas, masks, the model's extra_conds); packs
    call it inside their samplers (comfyui-tooling-nodes' regions). Needs ComfyUI's BaseModel: refused here."""
    raise UnsupportedFeature(
        "comfy.samplers.process_conds(...)",
        "conds are prepared for the model on the executors, not by an in-process BaseModel",
    )


def add_area_dims(area: list, num_dims: int) -> list:
    """An area [sizes..., offsets...] padded at the front with whole-axis dims up to `num_dims` axes."""
    while len(area) // 2 < num_dims:
        half = len(area) // 2
        area = [2147483648] + area[:half] + [0] + area[half:]
    return area


def get_area_and_mult(conds: dict, x_in: torch.Tensor, timestep_in: torch.Tensor) -> CondObj | None:
    """The part of `x_in` a prepared cond entry covers and its per-element weight, or None when the entry's
    timestep range excludes `timestep_in`. The weight is the mask (times mask_strength) or, for an area
    without a mask, ones feathered over up to 8 elements at inner edges; both times the entry's strength.
    The entry's model_conds are processed to the batch size and area."""
    dims = tuple(x_in.shape[2:])
    if "timestep_start" in conds and timestep_in[0] > conds["timestep_start"]:
        return None
    if "timestep_end" in conds and timestep_in[0] < conds["timestep_end"]:
        return None
    area = None
    if "area" in conds:
        area = add_area_dims(list(conds["area"]), len(dims))
        half = len(area) // 2
        if half > len(dims):
            area = area[: len(dims)] + area[half : half + len(dims)]
    n = len(dims)
    strength = conds.get("strength", 1.0)
    input_x = x_in
    if area is not None:
        for i in range(n):
            area[i] = min(input_x.shape[i + 2] - area[n + i], area[i])
            input_x = input_x.narrow(i + 2, area[n + i], area[i])
    if "mask" in conds:
        mask = conds["mask"][: input_x.shape[0]]
        if area is not None:
            for i in range(n):
                mask = mask.narrow(i + 1, area[n + i], area[i])
        mask = mask * conds.get("mask_strength", 1.0)
        reps = (input_x.shape[0] // mask.shape[0], input_x.shape[1]) + (1,) * (mask.ndim - 1)
        mask = mask.unsqueeze(1).repeat(reps)
    else:
        mask = torch.ones_like(input_x)
    mult = mask * strength
    if "mask" not in conds and area is not None:
        for i in range(n):
            ramp = min(8, mult.shape[2 + i] // 4)
            for t in range(ramp):
                w = (t + 1) / ramp
                if area[n + i] != 0:
                    mult.narrow(i + 2, t, 1).mul_(w)
                if area[i] + area[n + i] < x_in.shape[i + 2]:
                    mult.narrow(i + 2, area[i] - 1 - t, 1).mul_(w)
    conditioning = {k: c.process_cond(batch_size=x_in.shape[0], area=area) for k, c in conds["model_conds"].items()}
    if "gligen" in conds:
        raise UnsupportedFeature(
            "comfy.samplers.get_area_and_mult (gligen)",
            "GLIGEN models run in ComfyUI's process; they are not loaded here",
        )
    return CondObj(input_x, mult, conditioning, area, conds.get("control"), None, conds.get("uuid"), conds.get("hooks"))


def cond_equal_size(c1: dict, c2: dict) -> bool:
    if c1 is c2:
        return True
    return c1.keys() == c2.keys() and all(c1[k].can_concat(c2[k]) for k in c1)


def can_concat_cond(c1: CondObj, c2: CondObj) -> bool:
    """Whether two prepared entries can run in one model call: same input shape, the very same control and
    patches objects (or none on both), and model conds that concatenate."""
    if c1.input_x.shape != c2.input_x.shape:
        return False
    for a, b in ((c1.control, c2.control), (c1.patches, c2.patches)):
        if (a is None) != (b is None) or (a is not None and a is not b):
            return False
    return cond_equal_size(c1.conditioning, c2.conditioning)


def cond_cat(c_list: list[dict]) -> dict:
    """Model conds of several entries joined per key (each key's first value concatenates the rest)."""
    grouped: dict[str, list] = {}
    for c in c_list:
        for k, v in c.items():
            grouped.setdefault(k, []).append(v)
    return {k: vs[0].concat(vs[1:]) for k, vs in grouped.items()}
