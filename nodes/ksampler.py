"""KSampler as a composition of ModelFn calls: one `denoise_step` invocation per sampler step.

The head computes what is cheap and exact (noise, sigmas, scaling); each step goes through the
runtime, which runs it in-process or on an executor without the node knowing which.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from cluster.call import Params
from cluster.refs import ModelRef
from cluster.runtime import runtime
from nodes import arch, diffsynth, infinitetalk, previews, uso
from nodes.conditioning import flatten, require
from nodes.conditioning_areas import resolve
from nodes.inputs import require_model
from nodes.modelfns import cfg_split
from nodes.modelfns.denoise import STATE_PREFIX, DenoiseParams
from nodes.modelfns.hooks import uses_hooks
from nodes.modelfns.model_options import (
    CFG_OVERRIDES,
    COMPILE,
    DTYPE,
    ROPE,
    WINDOWS,
    carried_conditionings,
    latent_format,
    sampler_patches,
    sampling_config,
    weights_ref,
)
from nodes.modelfns.model_patches import Patches
from nodes.progress import report_progress, throw_if_interrupted
from nodes.sampling.context_windows import freenoise
from nodes.sampling.model_sampling import model_sampling_from_config
from nodes.sampling.noise import prepare_noise
from nodes.sampling.samplers import SAMPLER_NAMES, get_sampler
from nodes.sampling.schedules import SCHEDULER_NAMES, advanced_sigmas, ksampler_sigmas

# The pixels per latent cell of the families whose VAE is not 8x (ComfyUI's latent formats'
# spacial_downscale_ratio): an empty latent made for another ratio is resized to theirs.
DOWNSCALE_KEY = "downscale_ratio_spacial"
SPATIAL_DOWNSCALE = {
    "flux2": 16,
    "flux3": 16,
    "mage_flow": 16,
    "qwen_image21": 16,
    "wan22_5b": 16,
    "ltxv": 32,
    "minimax_h3": 16,
}


def fix_empty_latent_channels(model: ModelRef, latent: torch.Tensor, downscale: int | None = None) -> torch.Tensor:
    """An all-zero latent with the wrong channel count (EmptyLatentImage into a 16-channel model) is
    widened to the model's channels, as ComfyUI does; any other mismatch is an error. An all-zero latent made
    for `downscale` pixels per cell (the latent's downscale_ratio_spacial, 8 from EmptyLatentImage) is resized
    to the model's ratio (nearest-exact, sides rounded), as today's ComfyUI does. A model whose latents
    have a frame axis (Qwen-Image) gets it added to a 4-D latent, as ComfyUI does: its output is [B,C,1,H,W]."""
    if getattr(latent, "is_nested", False):
        # LTXV Concat AV Latent's video + audio pair: only LTX-2's audio-video network denoises it (AV_PACKED).
        raise ValueError(
            f"latent_image: an audio-video latent (LTXV Concat AV Latent) cannot be sampled by the "
            f"{model.arch} model; only an LTX-2 audio-video model samples it"
        )
    channels = arch.latent_format(model.arch).channels
    if latent.shape[1] != channels:
        if torch.count_nonzero(latent) != 0:
            raise ValueError(
                f"latent_image: has {latent.shape[1]} channels but the {model.arch} model expects {channels}"
            )
        latent = torch.zeros(latent.shape[0], channels, *latent.shape[2:], dtype=latent.dtype)
    ratio = SPATIAL_DOWNSCALE.get(model.arch, 8)
    if downscale is not None and downscale != ratio and torch.count_nonzero(latent) == 0:
        scale = downscale / ratio
        size = (round(latent.shape[-2] * scale), round(latent.shape[-1] * scale))
        latent = torch.zeros(*latent.shape[:-2], *size, dtype=latent.dtype)  # zeros resized stay zeros
    if arch.has_frame_axis(model.arch) and latent.dim() == 4:
        latent = latent.unsqueeze(2)
    return latent


def single_frame(latent: torch.Tensor, input_name: str = "latent_image") -> torch.Tensor:
    """[B,C,1,H,W] -> [B,C,H,W]: the samplers work on image latents; a frame axis goes back on at the end.
    ComfyUI's noise for [B,C,1,H,W] is the same draw as for [B,C,H,W]."""
    if latent.dim() != 5:
        return latent
    if latent.shape[2] != 1:
        raise ValueError(f"{input_name}: a latent of {latent.shape[2]} frames; this model denoises single images")
    return latent[:, :, 0]


LOAD_ERROR = "cannot load model"


async def call_model_fn(
    fn: str, ref: ModelRef, input_name: str, inputs: dict, params: Params | dict, *, spread: bool = False
) -> dict:
    """runtime().call, with weight-loading failures (here or on an executor) prefixed by the node input."""
    try:
        if spread:
            return await runtime().call(fn, ref, inputs, params, spread=True)
        return await runtime().call(fn, ref, inputs, params)  # a pack's own Runtime may predate `spread`
    except Exception as e:
        if LOAD_ERROR in str(e):
            raise ValueError(f"{input_name}: {e}") from e
        raise


def check_hint_batches(conditioning: list, batch: int, input_name: str, model_arch: str | None = None) -> None:
    """Each ControlNet hint must be one image or a batch that divides the latent batch (it is repeated), and
    each ControlNet must be of the sampled model's family (`model_arch`): one trained for another family
    cannot add to this network, and is refused before the first step rather than failing in it on mismatched
    shapes or being left unread."""
    for _, opts in conditioning:
        spec = opts.get("control")
        for c in spec.chain() if spec is not None else []:
            if model_arch is not None and c.ref.arch != model_arch:
                name = Path(c.ref.sources[0]).name if c.ref.sources else "its file"
                raise ValueError(
                    f"{input_name}: the ControlNet {name} is a {c.ref.arch} ControlNet and cannot apply to this "
                    f"{model_arch} model: use a ControlNet made for {model_arch}"
                )
            hb = c.hint.shape[0]
            if batch % hb:
                raise ValueError(
                    f"{input_name}: the ControlNet hint image has a batch of {hb}, which does not "
                    f"divide the latent batch of {batch}"
                )


@dataclass(frozen=True)
class SamplerChoice:
    """A SAMPLER value: a sampler of nodes.sampling.samplers by name, with options for its step function
    (eta, s_noise, r, solver_type, order) as the sampler-object nodes set them. Plain data: it travels
    to the executors in each step's params."""

    name: str
    options: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class NoiseChoice:
    """A NOISE value: the initial noise from `seed` (RandomNoise), or none (DisableNoise, whose seed 0
    is still the seed of the ancestral and SDE samplers' per-step noise, as in ComfyUI)."""

    seed: int = 0
    enabled: bool = True

    def generate(self, latent: dict, samples: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return torch.zeros(samples.shape, dtype=samples.dtype)
        return prepare_noise(samples, self.seed, latent.get("batch_index"))


@dataclass(frozen=True)
class GuiderChoice:
    """A GUIDER value: the model, its conditionings by role and the guidance scales.
    kind "cfg": positive/negative with cfg (CFGGuider, and BasicGuider as positive alone at cfg 1);
    kind "perp_neg": positive/negative with cfg and the empty prompt as middle, cfg2 the negative's scale
    (PerpNegGuider);
    kind "dual": positive/middle/negative with cfg (cond1 over cond2) and cfg2 (cond2 over negative),
    `nested` choosing DualCFGGuider's style. `uncond_model` (DualModelGuider) runs the negative side on another
    MODEL; kind "modality": positive/negative with cfg for an audio-video latent's video and cfg2 for its audio
    (LTXVDualCFGGuider)."""

    model: ModelRef
    positive: list
    negative: list
    cfg: float = 1.0
    kind: str = "cfg"
    middle: list | None = None
    cfg2: float = 1.0
    nested: bool = False
    uncond_model: ModelRef | None = None


async def common_ksampler(
    model: ModelRef,
    seed: int,
    steps: int,
    cfg: float,
    sampler_name: str,
    scheduler: str,
    positive: list,
    negative: list,
    latent: dict,
    denoise: float = 1.0,
    disable_noise: bool = False,
    start_step: int | None = None,
    last_step: int | None = None,
    force_full_denoise: bool = False,
) -> tuple[dict]:
    model = require_model(model)
    positive, negative = require(positive, "positive"), require(negative, "negative")
    if sampler_name not in SAMPLER_NAMES:
        raise ValueError(f"sampler_name: unknown sampler {sampler_name!r}")
    if scheduler not in SCHEDULER_NAMES:
        raise ValueError(f"scheduler: unknown scheduler {scheduler!r}")
    ms = model_sampling_from_config(sampling_config(model))
    sigmas = ksampler_sigmas(ms, scheduler, steps, denoise, sampler_name)
    if start_step is not None or last_step is not None:
        sigmas = advanced_sigmas(sigmas, start_step, last_step, force_full_denoise)
    if len(sigmas) <= 1:
        # KSampler's cut left nothing to sample (start at or past the end): the latent as it came
        out = dict(latent)
        out["samples"] = fix_empty_latent_channels(model, latent["samples"], out.pop(DOWNSCALE_KEY, None))
        return (out,)
    out, _ = await sample_guided(
        GuiderChoice(model, positive, negative, cfg),
        SamplerChoice(sampler_name),
        sigmas,
        latent,
        NoiseChoice(seed, not disable_noise),
    )
    return (out,)


# Audio-video latents whose parts one network denoises together (LTX-2, MiniMax H3): packed side by side in one
# [B,1,N] tensor and cut apart again after sampling, as ComfyUI samples a NestedTensor (comfy.utils.pack_latents).
AV_PACKED = frozenset({"ltx2", "minimax_h3"})


def _audio_carry(model: ModelRef):
    """MiniMax H3's audio carry (nodes.models.minimax_h3_engine): the sampler steps the audio part as a variable
    scaled onto the video schedule; None for the families that sample both parts on one schedule."""
    if model.arch != "minimax_h3":
        return None
    from nodes.models import minimax_h3_engine as engine

    return engine, engine.sampling_shifts(sampling_config(model))


@dataclass(frozen=True)
class PresetNoise(NoiseChoice):
    """Initial noise drawn beforehand (an audio-video latent's, part by part from one generator)."""

    preset: torch.Tensor | None = None

    def generate(self, latent: dict, samples: torch.Tensor) -> torch.Tensor:
        return self.preset


async def _sample_packed_av(
    guider: GuiderChoice, sampler: SamplerChoice, sigmas: torch.Tensor, latent: dict, noise: NoiseChoice
) -> tuple[dict, dict]:
    if latent.get("batch_index") is not None:
        raise ValueError("latent_image: batch_index on an LTX-2 audio-video latent is not supported yet")
    pair = latent["samples"]
    parts = pair.unbind()
    carry = _audio_carry(require_model(guider.model))
    if carry is not None and latent.get("noise_mask") is not None:  # ComfyUI's H3 re-times masked rows itself
        raise ValueError("latent_image: a noise mask on a MiniMax H3 audio-video latent is not supported yet")
    if carry is not None:  # the clean (or partly denoised) input audio as the carried variable; noise is added to it
        engine, shifts = carry
        parts = [parts[0], engine.to_carried(parts[1], 0.0, shifts), *parts[2:]]
    shapes = [tuple(p.shape) for p in parts]
    gen = torch.Generator(device="cpu").manual_seed(noise.seed)  # ComfyUI: one generator, part after part
    noises = [
        torch.randn(p.shape, dtype=p.dtype, generator=gen) if noise.enabled else torch.zeros_like(p) for p in parts
    ]
    packed = torch.cat([p.reshape(p.shape[0], 1, -1) for p in parts], dim=-1)
    preset = torch.cat([n.reshape(n.shape[0], 1, -1) for n in noises], dim=-1)
    mask = latent.get("noise_mask")
    if mask is not None:  # each part's mask at its latent's size (ComfyUI: a part without one is all ones); the
        # audio part's mask gives its tokens their own timesteps (LTX-2's step_timesteps), as the video's does
        masks = list(mask.unbind()) if getattr(mask, "is_nested", False) else [mask]
        masks = masks[: len(parts)] + [torch.ones(p.shape) for p in parts[len(masks) :]]
        prepared = [_prepare_mask(m, p) for m, p in zip(masks, parts, strict=True)]
        mask = torch.cat([m.reshape(m.shape[0], 1, -1) for m in prepared], dim=-1)
    out, denoised = await sample_guided(
        guider,
        sampler,
        sigmas,
        {**latent, "samples": packed, LATENT_SHAPES: shapes, "noise_mask": mask},
        PresetNoise(noise.seed, noise.enabled, preset),
    )

    def unpacked(t: torch.Tensor, sigma: float):
        cut, start = [], 0
        for shape in shapes:
            n = math.prod(shape[1:])
            cut.append(t[:, :, start : start + n].reshape(t.shape[0], *shape[1:]))
            start += n
        if carry is not None:  # back to the audio stream's own latent at the sigma the result is at
            cut[1] = carry[0].from_carried(cut[1], sigma, carry[1])
        return type(pair)(cut)

    def restored(result: dict, sigma: float) -> dict:  # the output keeps the input's own (nested) noise mask
        result = {k: v for k, v in result.items() if k != "noise_mask"}
        if latent.get("noise_mask") is not None:
            result["noise_mask"] = latent["noise_mask"]
        return {**result, "samples": unpacked(result["samples"], sigma)}

    last = float(sigmas[-1]) if len(sigmas) else 0.0
    return restored(out, last), restored(denoised, 0.0)


LATENT_SHAPES = "latent_shapes"


def empty_av_latent(model: ModelRef, latent: dict) -> dict:
    """An empty image or video latent given to MiniMax H3 as today's ComfyUI gives it (its MiniMaxH3AV latent
    format's fix_empty_latent): channels and sides fixed, an image as one frame [B,C,1,H,W], paired with the silent
    audio latent of its duration; the pair is sampled together. Any other latent unchanged."""
    samples = latent["samples"]
    if model.arch != "minimax_h3" or getattr(samples, "is_nested", False) or LATENT_SHAPES in latent:
        return latent  # a pair, or the pair packed for sampling
    if torch.count_nonzero(samples) != 0:
        return latent
    from nodes.library.ltxv_av import AVLatent
    from nodes.models.minimax_h3_shapes import silent_audio_shape

    out = dict(latent)
    video = fix_empty_latent_channels(model, samples, out.pop(DOWNSCALE_KEY, None))
    video = video.unsqueeze(2) if video.dim() == 4 else video
    out["samples"] = AVLatent((video, torch.zeros(silent_audio_shape(tuple(video.shape)), dtype=video.dtype)))
    return out


async def sample_guided(
    guider: GuiderChoice, sampler: SamplerChoice, sigmas: torch.Tensor, latent: dict, noise: NoiseChoice
) -> tuple[dict, dict]:
    """The one sampling loop of KSampler, KSamplerAdvanced, SamplerCustom and SamplerCustomAdvanced: one
    `denoise_step` invocation per step, the sampler state and the noise generator's state travelling as
    tensors between them. Returns (output latent, the last step's denoised prediction as a latent; the
    output itself when no step ran), as ComfyUI's custom samplers do."""
    model = require_model(guider.model)
    latent = empty_av_latent(model, latent)
    if getattr(latent["samples"], "is_nested", False) and model.arch in AV_PACKED:
        return await _sample_packed_av(guider, sampler, sigmas, latent, noise)
    out = dict(latent)
    shapes = out.pop(LATENT_SHAPES, None)
    downscale = out.pop(DOWNSCALE_KEY, None)
    full = latent["samples"] if shapes is not None else fix_empty_latent_channels(model, latent["samples"], downscale)
    out["samples"] = full
    if len(sigmas) == 0:
        return out, out
    # A video model denoises all frames at once; the image families' samplers work on [B,C,H,W]. Qwen-Image-Layered
    # denoises its frames (composite and layers) at once too (a plain Qwen-Image model refuses them when applied).
    layered = model.arch == "qwen_image" and full.dim() == 5 and full.shape[2] > 1
    samples = full if arch.is_video(model.arch) or layered else single_frame(full)

    def shaped(t: torch.Tensor) -> torch.Tensor:  # the output has the input's frame axis, as ComfyUI's
        return t.unsqueeze(2) if full.dim() == 5 and t.dim() == 4 else t

    for name in ("positive", "negative") + (("middle",) if guider.middle is not None else ()):
        check_hint_batches(getattr(guider, name), samples.shape[0], name, model.arch)
    noise_t = noise.generate(latent, samples)
    windows = model.option(WINDOWS)
    if windows is not None and windows.freenoise:  # ComfyUI shuffles the noise once, before the sampler starts
        noise_t = freenoise(noise_t, windows, noise.seed)
    ms_config = sampling_config(model)
    ms = model_sampling_from_config(ms_config)
    fmt = latent_format(model)
    # ComfyUI leaves an all-zero latent unshifted (an empty latent stays empty in model space).
    latent_in = fmt.process_in(samples) if torch.count_nonzero(samples) > 0 else samples
    max_sigma, first = float(ms.sigma_max), float(sigmas[0])
    max_denoise = math.isclose(max_sigma, first, rel_tol=1e-05) or first > max_sigma
    stepper = get_sampler(sampler.name)  # an adaptive sampler (dpm_adaptive) ends the loop from its state
    # VOID's DDIM starts from the noise as drawn (ComfyUI's VOID_DDIM skips the noise scaling and the input latent)
    x = noise_t.float() if stepper.starts_from_noise else ms.noise_scaling(sigmas[0], noise_t, latent_in, max_denoise)

    tensors, params = step_inputs(guider, sampler, samples, noise.seed, sigmas)
    control_latents, controls = await diffsynth.prepare(model, samples)
    if controls is not None:  # QwenImageDiffsynthControlnet: its image encoded at this latent's size
        tensors.update(control_latents)
        params = params.replace(diffsynth=controls)
    uso_states, uso_projectors = uso.step_inputs(model)
    if uso_projectors is not None:  # USOStyleReference: the step projects the states to style tokens
        tensors.update(uso_states)
        params = params.replace(uso=uso_projectors)
    talk_inputs, talk = infinitetalk.step_inputs(model, fmt.process_in)
    if talk is not None:  # WanInfiniteTalkToVideo: audio windows and motion latent for the patch in the steps
        tensors.update(talk_inputs)
        params = params.replace(infinitetalk=talk)
    if shapes is not None:
        params = params.replace(latent_shapes=shapes)
    # ComfyUI's VOID_DDIM never reads the noise mask (the inpainting wrapper is KSAMPLER's)
    mask = None if stepper.starts_from_noise else latent.get("noise_mask")
    if mask is not None:
        prepared = mask if shapes is not None else _prepare_mask(mask, samples)  # a packed pair's is ready
        tensors.update(denoise_mask=prepared, latent_image=latent_in, noise=noise_t)
    state: dict[str, torch.Tensor] = {}
    denoised = None
    total = len(sigmas) - 1
    split = cfg_split.splittable(params, tensors)
    i = 0
    while not stepper.finished(i, sigmas, {k[len(STATE_PREFIX) :]: v for k, v in state.items()}):
        throw_if_interrupted()
        step_inputs_i, step_params = {**tensors, **state, "x": x}, params.replace(step=i)
        if split and runtime().idle_executors() >= 2:
            result = await _split_step(weights_ref(model), step_inputs_i, step_params)
        else:
            result = await call_model_fn("denoise_step", weights_ref(model), "model", step_inputs_i, step_params)
        x, denoised = result["x"], result["denoised"]
        state = {k: v for k, v in result.items() if k.startswith(STATE_PREFIX)}
        report_progress(i + 1, total, previews.preview(denoised) if shapes is None else None)
        i += 1
    unscaled = x if stepper.starts_from_noise else ms.inverse_noise_scaling(sigmas[-1], x)
    out["samples"] = shaped(fmt.process_out(unscaled))
    out["samples"] = infinitetalk.finish(model, out["samples"])
    if denoised is None:
        return out, out
    return out, {**out, "samples": shaped(fmt.process_out(denoised))}


async def _split_step(ref: ModelRef, inputs: dict, params: DenoiseParams) -> dict:
    """One step as a CFG split (nodes.modelfns.cfg_split): each side's prediction on an executor of its own, at
    once, then the step with both given."""
    sides = await asyncio.gather(
        *(
            call_model_fn("denoise_step", ref, "model", inputs, params.replace(cfg_side=side), spread=True)
            for side in cfg_split.SIDES
        )
    )
    given = {cfg_split.given_name(side): out[cfg_split.PREDICTION] for side, out in zip(cfg_split.SIDES, sides)}
    return await call_model_fn("denoise_step", ref, "model", {**inputs, **given}, params)


def step_inputs(
    guider: GuiderChoice, sampler: SamplerChoice, samples: torch.Tensor, seed: int, sigmas: torch.Tensor
) -> tuple[dict[str, torch.Tensor], DenoiseParams]:
    """The tensors and params every `denoise_step` of one guided run shares (all but x, the step index, the
    sampler state and the inpainting tensors): the conditionings flattened, the MODEL's patches and options.
    `samples` is the latent as the steps see it (its shape sizes the conditionings)."""
    model = require_model(guider.model)
    windows = model.option(WINDOWS)
    ms_config = sampling_config(model)
    ms = model_sampling_from_config(ms_config)
    percent_to_sigma = lambda p: float(ms.percent_to_sigma(p))  # noqa: E731
    tensors: dict[str, torch.Tensor] = {"sigmas": sigmas}
    params: dict[str, Any] = {  # DenoiseParams' fields, gathered as the guider and the MODEL set them
        "sampler": sampler.name,
        "cfg": float(guider.cfg),
        "seed": seed,
        "model_sampling": ms_config,
        "image_size": (samples.shape[-2] * 8, samples.shape[-1] * 8),
    }
    if sampler.options:
        params["sampler_options"] = dict(sampler.options)
    # ComfyUI's order of a guider's conds (positive first): it decides which opposite-area entries are added.
    names = ("positive", "middle", "negative") if guider.middle is not None else ("positive", "negative")
    for name, side in zip(names, resolve([getattr(guider, n) for n in names], samples.shape)):
        side_tensors, params[name] = flatten(name, side, percent_to_sigma)
        tensors.update(side_tensors)
    if guider.kind == "dual":
        params["dual_cfg"] = {"cfg2": guider.cfg2, "nested": guider.nested}
    elif guider.kind == "perp_neg":
        params["perp_neg"] = {"neg_scale": guider.cfg2}
    elif guider.kind == "modality":
        params["av_cfg"] = [float(guider.cfg), float(guider.cfg2)]
    if uses_hooks(*(params.get(n) for n in names)):  # the weights the steps apply the conds' hooks to
        params["hook_base"] = weights_ref(model)
    patches = sampler_patches(model)
    for name, carried in carried_conditionings(model).items():  # e.g. PerpNeg's empty prompt
        (side,) = resolve([carried], samples.shape)
        side_tensors, patches[name] = flatten(name, side, percent_to_sigma)
        tensors.update(side_tensors)
    if patches:  # RescaleCFG and the like, or a MODEL patched by a node pack (comfy_bridge.packs.proxies)
        params["model_patches"] = Patches(patches)
    if model.option(COMPILE):  # TorchCompileModel: the executor runs the network compiled with this backend
        params["torch_compile"] = model.option(COMPILE)
    if model.option(DTYPE):  # ModelComputeDtype: the executor runs a copy of the network in this dtype
        params["compute_dtype"] = model.option(DTYPE)
    if model.option(CFG_OVERRIDES):  # CFGOverride: the cfg each evaluation uses inside its sigma ranges
        params["cfg_overrides"] = model.option(CFG_OVERRIDES)
    if model.option(ROPE):  # ScaleROPE: the network scales and shifts the image's position ids
        params["rope_options"] = dict(model.option(ROPE))
    if windows is not None:  # ContextWindowsManual: each evaluation window by window
        params[WINDOWS] = windows.as_param()
    if guider.uncond_model is not None:  # DualModelGuider: the negative side on its own weights and schedule
        params["uncond_model"] = weights_ref(guider.uncond_model)
        params["uncond_sampling"] = sampling_config(guider.uncond_model)
    return tensors, DenoiseParams(**params)


def _prepare_mask(mask: torch.Tensor, samples: torch.Tensor) -> torch.Tensor:
    """Noise mask [B,H,W] or [H,W] at pixel or latent size -> [B,1,h,w] at latent size, like ComfyUI; for a video
    latent [B,C,T,h,w] a mask [B,1,T,h,w] (or [T,h,w]) is resized in all three (ComfyUI's trilinear)."""
    if samples.dim() == 5:
        m = mask.float() if mask.dim() == 5 else mask.reshape(1, 1, -1, *mask.shape[-2:]).float()
        m = torch.nn.functional.interpolate(m, size=samples.shape[2:], mode="trilinear")
        b = samples.shape[0]
        m = torch.cat([m] * math.ceil(b / m.shape[0]))[:b]
        return m.expand(-1, samples.shape[1], -1, -1, -1).contiguous()
    m = mask.reshape(-1, 1, mask.shape[-2], mask.shape[-1]).float()
    m = torch.nn.functional.interpolate(m, size=samples.shape[2:], mode="bilinear")
    b = samples.shape[0]
    m = torch.cat([m] * math.ceil(b / m.shape[0]))[:b]
    return m.expand(-1, samples.shape[1], -1, -1).contiguous()
