"""QwenImageDiffsynthControlnet's patch as the head carries it: a MODEL option naming the DiffSynth ControlNet
(a MODEL_PATCH ref), the VAE, the control image (and mask) and the strength. ComfyUI encodes the image with the
VAE at the size of the latent being sampled (re-encoding a scaled copy when the sizes differ), so the encoding
waits for the sampling loop: `prepare` runs it there, once per run, as a `vae_encode` ModelFn call, and hands the
patched control latent to every denoise step as the input `diffsynth.<k>` (nodes.modelfns.diffsynth applies it).
The option is sampling-only (model_options.weights_ref drops it), so the transformer's weight cache is shared."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import torch

from cluster.refs import ModelRef
from nodes.modelfns.model_options import DIFFSYNTH
from nodes.models.components import FLUX_LATENT, WAN21_LATENT
from nodes.models.model_patch import ZIMAGE_FUN_CONTROL

OPTION = DIFFSYNTH  # the MODEL option: a tuple of DiffSynthPatch in the order the nodes applied them
INPUT = "diffsynth"  # the steps' inputs diffsynth.0, diffsynth.1, ...
SPATIAL = 8  # the Qwen-Image (Wan 2.1) VAE's pixels per latent cell
LATENT_CHANNELS = 16


def digest_of(*tensors: torch.Tensor | None) -> str:
    """A digest of tensors' shapes and float values (None skipped): a patch's key without its pixels."""
    h = hashlib.sha256()
    for t in tensors:
        if t is not None:
            t = t.detach().cpu().contiguous().float()
            h.update(repr(tuple(t.shape)).encode())
            h.update(t.numpy().tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class DiffSynthPatch:
    """One applied DiffSynth ControlNet; equal, hashed and keyed (ModelRef.key reads the repr) by a digest of its
    image and mask, so the MODEL stays a hashable value. `mask` is ComfyUI's inverted mask, [B,1,H,W]."""

    patch: ModelRef
    vae: ModelRef
    strength: float
    digest: str
    image: torch.Tensor = field(repr=False, compare=False, hash=False)
    mask: torch.Tensor | None = field(repr=False, compare=False, hash=False)

    @classmethod
    def of(
        cls, patch: ModelRef, vae: ModelRef, image: torch.Tensor, strength: float, mask: torch.Tensor | None
    ) -> DiffSynthPatch:
        return cls(patch, vae, float(strength), digest_of(image, mask), image, mask)


@dataclass(frozen=True)
class LLLitePatch:
    """One applied Anima LLLite (AnimaLLLiteApply): no VAE; its control image (and mask) is resized to the latent
    being sampled and handed to the steps, which run the LLLite's encoder in their sigma window
    (nodes.models.anima_lllite). Keyed by a digest of the image and mask like DiffSynthPatch."""

    patch: ModelRef
    strength: float
    sigma_start: float
    sigma_end: float
    digest: str
    image: torch.Tensor = field(repr=False, compare=False, hash=False)
    mask: torch.Tensor | None = field(repr=False, compare=False, hash=False)

    @classmethod
    def of(
        cls,
        patch: ModelRef,
        image: torch.Tensor,
        mask: torch.Tensor | None,
        strength: float,
        sigma_start: float,
        sigma_end: float,
    ) -> LLLitePatch:
        return cls(patch, float(strength), float(sigma_start), float(sigma_end), digest_of(image, mask), image, mask)


def with_patch(model: ModelRef, entry: DiffSynthPatch | LLLitePatch) -> ModelRef:
    """ComfyUI's set_model_double_block_patch: patches append and run in that order."""
    return model.with_option(OPTION, tuple(model.option(OPTION, ())) + (entry,))


def _scaled_like_comfyui(image: torch.Tensor, width: int, height: int) -> torch.Tensor:
    from nodes.upscale import common_upscale

    return common_upscale(image.movedim(-1, 1), width, height, "area", "center").movedim(1, -1)


def lllite_input(entry: LLLitePatch, latent_hw: tuple[int, int]) -> torch.Tensor:
    """An Anima LLLite's encoder input for a latent of `latent_hw` cells, padded to whole 2x2 patches as the DiT
    sees it."""
    from nodes.models.anima_lllite import control_input

    h, w = latent_hw
    in_channels = int(entry.patch.option("in_channels", 3))
    masked = bool(entry.patch.option("masked_input", False))
    return control_input(entry.image, entry.mask, (h + h % 2, w + w % 2), in_channels, masked)


def step_param(entry: DiffSynthPatch | LLLitePatch) -> tuple[ModelRef, float]:
    """What a denoise step gets of an entry: the patch ref (an LLLite's with its sigma window) and the strength."""
    if isinstance(entry, LLLitePatch):
        return entry.patch.with_option("sigma_window", (entry.sigma_start, entry.sigma_end)), entry.strength
    return entry.patch, entry.strength


async def control_latent(entry: DiffSynthPatch | LLLitePatch, latent_hw: tuple[int, int]) -> torch.Tensor:
    """For a Z-Image Fun ControlNet: the image encoded at the (even-padded) latent's pixel size, in Flux's model
    space, [B,16,H,W]. For a DiffSynth ControlNet:
    the patched control latent [B, tokens, 4 * channels] for a latent of `latent_hw` cells: the image (scaled
    to the latent's pixel size where it differs, area filter with centre crop), VAE-encoded, its mask channels
    appended where the ControlNet takes them (ones without a mask), the latent part in model space (Wan 2.1's
    normalisation), padded circularly to whole 2x2 patches and packed."""
    if isinstance(entry, LLLitePatch):
        return lllite_input(entry, latent_hw)
    from nodes.ksampler import call_model_fn
    from nodes.model_nodes import crop_to_multiple

    h, w = latent_hw
    fun = entry.patch.arch == ZIMAGE_FUN_CONTROL
    if fun:  # ComfyUI encodes at the size of the latent padded to whole 2x2 patches, as the transformer sees it
        h, w = h + h % 2, w + w % 2
    image = entry.image
    if (image.shape[1], image.shape[2]) != (h * SPATIAL, w * SPATIAL):
        image = _scaled_like_comfyui(image, w * SPATIAL, h * SPATIAL)
    out = await call_model_fn("vae_encode", entry.vae, "vae", {"pixels": crop_to_multiple(image, SPATIAL)}, {})
    latent = out["latent"]
    latent = latent[:, :, 0] if latent.dim() == 5 else latent  # one frame
    if latent.shape[1] != LATENT_CHANNELS:
        raise ValueError(
            f"vae: it encodes to {latent.shape[1]} latent channels; the ControlNet patch takes a "
            f"{LATENT_CHANNELS}-channel VAE's (Qwen-Image's, Z-Image's)"
        )
    if fun:  # the Fun ControlNet patches the model-space latent itself (nodes.models.zimage_fun_control)
        return FLUX_LATENT.process_in(latent)
    extra = int(entry.patch.option("extra_channels", 0))
    if extra:
        if entry.mask is None:
            mask = torch.ones_like(latent)[:, :extra]
        else:
            from nodes.upscale import common_upscale

            mask = common_upscale(
                entry.mask.mean(dim=1, keepdim=True), latent.shape[-1], latent.shape[-2], "bilinear", "none"
            )
            if mask.shape[0] != latent.shape[0]:
                raise ValueError(
                    f"mask: a batch of {mask.shape[0]} masks for a batch of {latent.shape[0]} control images"
                )
        latent = torch.cat([latent, mask.to(latent.dtype)], dim=1)
    latent = latent.clone()
    latent[:, :LATENT_CHANNELS] = WAN21_LATENT.process_in(latent[:, :LATENT_CHANNELS])
    # Flux's module on first use: the KSampler imports this one, and the compat modules packs import before
    # torchvision's op schemas are declared must not load diffusers (tests/packs/test_torchvision_ops.py)
    from nodes.models.flux import pack, patched

    return pack(patched(latent))


async def prepare(model: ModelRef, samples: torch.Tensor) -> tuple[dict[str, torch.Tensor], tuple | None]:
    """The steps' inputs and their `diffsynth` param ((patch ref, strength) per input, in order) for a run on
    latents shaped like `samples`; ({}, None) for a MODEL without the patch."""
    entries = model.option(OPTION, ())
    tensors = {
        f"{INPUT}.{k}": await control_latent(entry, tuple(samples.shape[-2:])) for k, entry in enumerate(entries)
    }
    return tensors, tuple(step_param(e) for e in entries) or None
