"""Flux.1 diffusion models (dev and schnell) from BFL/ComfyUI or diffusers single files.

The network is diffusers' FluxTransformer2DModel, with a config read from the tensor shapes. `apply` takes
ComfyUI's view of the model: a [B,16,H,W] latent, sigma as the timestep, guidance from the conditioning,
and does Flux's 2x2 patch packing and position ids the way ComfyUI's Flux model does.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from diffusers import FluxTransformer2DModel

from cluster.refs import ModelRef
from nodes.models import flux_lora
from nodes.models.components import FLUX_LATENT, DiffusionModel
from nodes.models.errors import ModelLoadError
from nodes.models.flux_configs import config_for_sources
from nodes.models.flux_keys import (
    BFL_MARKER,
    DIFFUSERS_MARKER,
    bfl_to_diffusers,
    count_blocks,
    find_prefix,
    strip_prefix,
)
from nodes.models.lora import merge_loras
from nodes.models.safetensors_io import build_module, load_state_dict
from nodes.models.unet import resize_to_batch_size
from nodes.upscale import common_upscale

REAL_FLUX_AXES = (16, 56, 56)  # BFL's RoPE split of the 128-wide heads of Flux.1
DEFAULT_GUIDANCE = 3.5  # ComfyUI's value when the conditioning carries none (FluxGuidance sets it)
PATCH = 2


def is_flux_state_dict(keys: Iterable[str]) -> bool:
    keys = list(keys)
    p = find_prefix(keys, BFL_MARKER)
    if p is not None and f"{p}img_in.weight" in keys:
        return True
    p = find_prefix(keys, DIFFUSERS_MARKER)
    return p is not None and f"{p}single_transformer_blocks.0.proj_mlp.weight" in keys


def to_diffusers_layout(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The transformer's weights in diffusers layout, whatever the file's layout and prefix."""
    p = find_prefix(sd.keys(), BFL_MARKER)
    if p is not None and f"{p}img_in.weight" in sd:
        return bfl_to_diffusers(strip_prefix(sd, p))
    p = find_prefix(sd.keys(), DIFFUSERS_MARKER)
    if p is not None:
        return strip_prefix(sd, p)
    raise ValueError("not a Flux transformer state dict (no img_in/double_blocks or x_embedder keys)")


def infer_config(sd: Mapping[str, torch.Tensor], axes_dim: Iterable[int] | None = None) -> dict[str, Any]:
    """FluxTransformer2DModel's config from a diffusers-layout state dict's shapes."""
    inner, in_channels = sd["x_embedder.weight"].shape
    n_double = count_blocks(sd, "transformer_blocks")
    n_single = count_blocks(sd, "single_transformer_blocks")
    block = "transformer_blocks.0" if n_double else "single_transformer_blocks.0"
    head_dim = sd[f"{block}.attn.norm_k.weight"].shape[0]
    if inner % head_dim:
        raise ValueError(f"Flux hidden size {inner} is not a multiple of the head dim {head_dim}")
    mlp = sd[
        "transformer_blocks.0.ff.net.0.proj.weight" if n_double else "single_transformer_blocks.0.proj_mlp.weight"
    ].shape[0]
    if mlp != 4 * inner:
        raise ValueError(f"Flux MLP width {mlp} is not 4 x hidden {inner}; diffusers' Flux supports ratio 4 only")
    if axes_dim is None:
        if head_dim != sum(REAL_FLUX_AXES):
            raise ValueError(
                f"cannot infer the RoPE axes of a Flux with head dim {head_dim}: the file needs a "
                f"config (safetensors metadata 'comfy_cluster.config' naming a folder with flux.json)"
            )
        axes_dim = REAL_FLUX_AXES
    axes_dim = tuple(int(a) for a in axes_dim)
    if sum(axes_dim) != head_dim:
        raise ValueError(f"RoPE axes {axes_dim} do not sum to the head dim {head_dim}")
    return {
        "patch_size": 1,  # the 2x2 patching happens outside the module (packing)
        "in_channels": int(in_channels),
        "out_channels": int(sd["proj_out.weight"].shape[0]),
        "num_layers": n_double,
        "num_single_layers": n_single,
        "attention_head_dim": int(head_dim),
        "num_attention_heads": int(inner // head_dim),
        "joint_attention_dim": int(sd["context_embedder.weight"].shape[1]),
        "pooled_projection_dim": int(sd["time_text_embed.text_embedder.linear_1.weight"].shape[1]),
        "guidance_embeds": "time_text_embed.guidance_embedder.linear_1.weight" in sd,
        "axes_dims_rope": axes_dim,
    }


def pack(x: torch.Tensor) -> torch.Tensor:
    """[B,C,H,W] (H, W even) -> [B, H/2*W/2, C*4], each token's features ordered (c, ph, pw)."""
    b, c, h, w = x.shape
    x = x.reshape(b, c, h // PATCH, PATCH, w // PATCH, PATCH).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (h // PATCH) * (w // PATCH), c * PATCH * PATCH)


def unpack(tokens: torch.Tensor, h_len: int, w_len: int) -> torch.Tensor:
    b, _, d = tokens.shape
    c = d // (PATCH * PATCH)
    x = tokens.reshape(b, h_len, w_len, c, PATCH, PATCH).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, h_len * PATCH, w_len * PATCH)


def image_ids(
    h_len: int,
    w_len: int,
    dtype: torch.dtype,
    device: torch.device,
    index: int = 0,
    h_offset: int = 0,
    w_offset: int = 0,
) -> torch.Tensor:
    """[h_len*w_len, 3] position ids: (index, row + h_offset, column + w_offset) per token, as ComfyUI's Flux
    builds them (index 0 for the image being denoised)."""
    ids = torch.zeros(h_len, w_len, 3, dtype=dtype, device=device)
    ids[..., 0] = index
    ids[..., 1] = torch.arange(h_offset, h_offset + h_len, dtype=dtype, device=device)[:, None]
    ids[..., 2] = torch.arange(w_offset, w_offset + w_len, dtype=dtype, device=device)[None, :]
    return ids.reshape(h_len * w_len, 3)


def rope_image_ids(h_len: int, w_len: int, rope: dict, axes: int, device: torch.device) -> torch.Tensor:
    """[h_len*w_len, axes] float32 position ids of the image being denoised under ScaleROPE's options, as ComfyUI's
    Flux builds them: the time axis at shift_t, rows and columns spread over (n - 1) * scale + 1 positions from
    their shift (a scale of 1 and no shift give 0, 1, 2, ...)."""
    h_span = (h_len - 1.0) * rope.get("scale_y", 1.0) + 1.0
    w_span = (w_len - 1.0) * rope.get("scale_x", 1.0) + 1.0
    h_off, w_off = 0 + rope.get("shift_y", 0.0), 0 + rope.get("shift_x", 0.0)
    ids = torch.zeros(h_len, w_len, axes, dtype=torch.float32, device=device)
    ids[..., 0] = 0 + rope.get("shift_t", 0.0)
    ids[..., 1] = torch.linspace(h_off, h_span - 1 + h_off, steps=h_len, device=device, dtype=torch.float32)[:, None]
    ids[..., 2] = torch.linspace(w_off, w_span - 1 + w_off, steps=w_len, device=device, dtype=torch.float32)[None, :]
    return ids.reshape(h_len * w_len, axes)


def patched(x: torch.Tensor) -> torch.Tensor:
    """Odd sizes: ComfyUI's 2x2-patch models pad circularly to whole patches (and crop the output back)."""
    return F.pad(x, (0, (-x.shape[-1]) % PATCH, 0, (-x.shape[-2]) % PATCH), mode="circular")


def reference_tokens(
    refs: list[torch.Tensor], method: str, h_len: int, w_len: int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """Flux Kontext's reference latents (model space, [B,16,h,w] each) as tokens to append to the image's,
    with their position ids; `method` places them as ComfyUI's Flux does: "offset" (index 1, each reference
    beside or below the ones before it, whichever keeps the canvas squarer), "index" (index 1, 2, ... at the
    origin) or "uxo" (index 0, diagonally past the image and the references before it). Offsets are in
    latent cells and become token offsets rounded half up."""
    tokens, ids = [], []
    for ref, (index, h_off, w_off) in zip(refs, reference_placements(refs, method, h_len, w_len)):
        padded = patched(ref.to(dtype))
        tokens.append(pack(padded))
        ids.append(
            image_ids(
                padded.shape[-2] // PATCH,
                padded.shape[-1] // PATCH,
                dtype,
                ref.device,
                index,
                (h_off + PATCH // 2) // PATCH,
                (w_off + PATCH // 2) // PATCH,
            )
        )
    return torch.cat(tokens, dim=1), torch.cat(ids)


def reference_placements(
    refs: Sequence[torch.Tensor], method: str, h_len: int = 0, w_len: int = 0
) -> list[tuple[int, int, int]]:
    """(frame index, row offset, column offset in latent cells) of each reference latent, as ComfyUI places
    them beside an image of h_len x w_len tokens: "index" (1, 2, ... at the origin), "uxo" (index 0,
    diagonally past the image and the references before it), anything else "offset" (index 1, each beside or
    below the ones before it, whichever keeps the canvas squarer)."""
    out = []
    h = w = index = 0
    for ref in refs:
        h_off = w_off = 0
        if method == "index":
            index += 1
        elif method == "uxo":
            index, h_off, w_off = 0, h_len * PATCH + h, w_len * PATCH + w
            h, w = h + ref.shape[-2], w + ref.shape[-1]
        else:
            index = 1
            if ref.shape[-2] + h > ref.shape[-1] + w:
                w_off = w
            else:
                h_off = h
            h, w = max(h, ref.shape[-2] + h_off), max(w, ref.shape[-1] + w_off)
        out.append((index, h_off, w_off))
    return out


def per_batch(v: Any, batch: int, device: torch.device) -> torch.Tensor:
    """A scalar or per-sample timestep/guidance as one float32 value per sample."""
    t = torch.as_tensor(v, dtype=torch.float32, device=device).reshape(-1)
    return t.expand(batch) if t.numel() == 1 else t


def fill_mask(mask: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
    """FLUX.1 Fill's mask channels: the pixel mask (its channels averaged; ones without one) resized to the
    latent's pixel size, each 8x8 pixel cell folded into 64 channels (row-major within the cell), as ComfyUI's
    Flux.concat_cond and BFL's sampling prepare it."""
    b, _, h, w = x.shape
    if mask is None:
        mask = torch.ones(b, 1, h, w, dtype=x.dtype, device=x.device)
    mask = mask.to(x.device, x.dtype)
    if mask.ndim == 3:  # a bare MASK [B,H,W]
        mask = mask.unsqueeze(1)
    mask = common_upscale(mask.mean(dim=1, keepdim=True), w * 8, h * 8, "bilinear", "center")
    cells = mask.reshape(mask.shape[0], h, 8, w, 8).permute(0, 2, 4, 1, 3).reshape(mask.shape[0], 64, h, w)
    return resize_to_batch_size(cells, b)


@dataclass
class FluxDiffusionModel(DiffusionModel):
    def concat_image(
        self, image: torch.Tensor | None, x: torch.Tensor, mask: torch.Tensor | None = None, mask_index: int = 0
    ) -> torch.Tensor | None:
        """The channels a wider-input Flux.1 takes beside the latent: the image latent in model space (Canny /
        Depth: twice the latent's channels), then FLUX.1 Fill's 64 mask channels (fill_mask). The image is
        resized to the latent (bilinear, centre crop) and batch; zeros without one. None for dev / schnell."""
        channels, out = self.config["in_channels"] // PATCH**2, self.config["out_channels"] // PATCH**2
        if channels <= out:
            return None
        image = torch.zeros_like(x) if image is None else image.to(x.device, x.dtype)
        image = common_upscale(image, x.shape[-1], x.shape[-2], "bilinear", "center")
        image = self.latent_format.process_in(resize_to_batch_size(image, x.shape[0]))
        if channels <= 2 * out:
            return image
        return torch.cat([image, fill_mask(mask, x)], dim=1)

    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control") is not None:
            raise NotImplementedError("ControlNet is not supported for Flux models yet")
        module: FluxTransformer2DModel = self.module
        device, dtype = x.device, self.dtype
        b, _, h, w = x.shape
        if cond.get("concat") is not None:  # Fill / Canny / Depth: concat_image's channels join the input
            x = torch.cat([x, cond["concat"].to(x)], dim=1)
        x = patched(x)
        h_len, w_len = x.shape[-2] // PATCH, x.shape[-1] // PATCH
        tokens, ids = pack(x.to(dtype)), image_ids(h_len, w_len, dtype, device)
        if cond.get("rope_options"):  # ScaleROPE
            ids = rope_image_ids(h_len, w_len, cond["rope_options"], 3, device).to(dtype)
        if cond.get("ref_latents"):  # Flux Kontext: references join the image tokens; only the image's are read
            ref_tokens, ref_ids = reference_tokens(
                cond["ref_latents"], cond.get("ref_latents_method") or "offset", h_len, w_len, dtype
            )
            tokens, ids = torch.cat([tokens, ref_tokens], dim=1), torch.cat([ids, ref_ids])

        context = cond["context"].to(device, dtype)
        pooled = cond.get("pooled")
        if pooled is None:
            pooled = torch.zeros(b, module.config.pooled_projection_dim, device=device, dtype=dtype)
        guidance = None
        if module.config.guidance_embeds:
            g = cond.get("guidance")
            guidance = per_batch(DEFAULT_GUIDANCE if g is None else g, b, device)
        style = style_tokens_first(cond.get("uso_tokens") or (), b, dtype, device)
        n_txt = context.shape[1] + (0 if style is None else style.shape[1])
        with guidance_embedding_off(module, bool(cond.get("guidance_disabled"))), text_tokens_after(module, style):
            out = module(
                hidden_states=tokens,
                encoder_hidden_states=context,
                pooled_projections=pooled.to(device, dtype),
                timestep=per_batch(timestep, b, device),  # sigma: Flux's time unit (multiplier 1)
                img_ids=ids,
                txt_ids=torch.zeros(n_txt, 3, dtype=dtype, device=device),  # USO's tokens: zero ids too
                guidance=guidance,
                return_dict=False,
            )[0]
        return unpack(out[:, : h_len * w_len], h_len, w_len)[:, :, :h, :w].float()


_guidance_off = threading.local()


def _zero_guidance(module: torch.nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor | None:
    return torch.zeros_like(output) if getattr(_guidance_off, "on", False) else None


@contextmanager
def guidance_embedding_off(module: FluxTransformer2DModel, off: bool) -> Iterator[None]:
    """ComfyUI's Flux with guidance None (FluxDisableGuidance): the time vector gets no guidance embedding,
    only the timestep's and the pooled text's. diffusers always adds one on a guidance-distilled model, so its
    guidance embedder answers zeros for this thread's call (t + 0 + pooled is t + pooled exactly). The hook
    is installed once and does nothing for other calls or threads."""
    if not off or not module.config.guidance_embeds:  # schnell has no guidance embedding to leave out
        yield
        return
    embedder = module.time_text_embed.guidance_embedder
    if not getattr(embedder, "_zero_guidance_hook", False):
        embedder.register_forward_hook(_zero_guidance)
        embedder._zero_guidance_hook = True
    _guidance_off.on = True
    try:
        yield
    finally:
        _guidance_off.on = False


_text_prefix = threading.local()


def _prefix_text(module: torch.nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor | None:
    style = getattr(_text_prefix, "tokens", None)
    return None if style is None else torch.cat([style, output], dim=1)


def style_tokens_first(tokens: Sequence[torch.Tensor], batch: int, dtype: torch.dtype, device) -> torch.Tensor | None:
    """USOStyleReference's projected tokens as ComfyUI's post_input patches leave them: each patch puts its tokens
    before the text, so the last applied comes first. One reference image serves a batch of any size."""
    if not tokens:
        return None
    out = []
    for t in reversed(tokens):
        if t.shape[0] not in (1, batch):
            raise ValueError(f"model: USO style tokens for {t.shape[0]} images, the batch has {batch}")
        out.append(t.to(device, dtype).expand(batch, -1, -1))
    return torch.cat(out, dim=1)


@contextmanager
def text_tokens_after(module: FluxTransformer2DModel, style: torch.Tensor | None) -> Iterator[None]:
    """ComfyUI's Flux post_input patch point: `style` [B, N, hidden] goes before the text tokens once the text-input
    layer (diffusers' context_embedder) has made them. The hook is installed once and does nothing for other calls
    or threads."""
    if style is None:
        yield
        return
    embedder = module.context_embedder
    if not getattr(embedder, "_prefix_text_hook", False):
        embedder.register_forward_hook(_prefix_text)
        embedder._prefix_text_hook = True
    _text_prefix.tokens = style
    try:
        yield
    finally:
        _text_prefix.tokens = None


def sampling_for(config: Mapping[str, Any]) -> dict[str, Any]:
    """ComfyUI: guidance-distilled Flux (dev) samples with ModelSamplingFlux (shift 1.15); schnell, without a
    guidance embedder, with ModelSamplingDiscreteFlow at shift 1.0 and multiplier 1.0."""
    if config["guidance_embeds"]:
        return {"kind": "flux", "shift": 1.15}
    return {"kind": "flow", "shift": 1.0, "multiplier": 1.0}


def with_loras(ref: ModelRef, state_dict: Mapping[str, torch.Tensor], path: str | None) -> dict[str, torch.Tensor]:
    """The BFL-named transformer with the ref's LoRAs merged in ComfyUI's Flux names (nodes.models.flux_lora)."""
    prefix = find_prefix(state_dict.keys(), BFL_MARKER)
    if prefix is None or f"{prefix}img_in.weight" not in state_dict:
        raise ModelLoadError(path, "LoRAs on Flux transformers in diffusers' layout are not supported yet")
    for patch in ref.patches:
        if flux_lora.is_control_lora(load_state_dict(patch.path, patch.digest)):
            raise ModelLoadError(patch.path, "BFL's Flux control LoRAs (Canny / Depth dev LoRAs) are not supported yet")
    bfl = strip_prefix(state_dict, prefix)
    return merge_loras(ref.patches, flux_lora.lora_targets(bfl), bfl, flux_lora.convert)[0]


def load_diffusion_model(
    ref: ModelRef, state_dict: Mapping[str, torch.Tensor], axes_dim: Iterable[int] | None = None
) -> FluxDiffusionModel:
    """A Flux DiffusionModel from a state dict in BFL (optionally `model.diffusion_model.`-prefixed) or
    diffusers layout. RoPE axes: `axes_dim`, else the config folder the file's metadata names, else Flux.1's."""
    path = ref.sources[0] if ref.sources else None
    if ref.patches:
        state_dict = with_loras(ref, state_dict, path)
    try:
        sd = to_diffusers_layout(state_dict)
        if axes_dim is None:
            axes_dim = config_for_sources(ref.sources)[1].get("axes_dim")
        config = infer_config(sd, axes_dim)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Flux transformer: {e}") from None
    dtype = sd["x_embedder.weight"].dtype
    module = build_module(lambda: FluxTransformer2DModel(**config), sd, path, "Flux transformer", dtype=dtype)
    return FluxDiffusionModel(
        arch="flux", module=module, latent_format=FLUX_LATENT, sampling=sampling_for(config), config=config, dtype=dtype
    )


# The loader (nodes.models.loader) finds every Flux entry point on this module.
from nodes.models.flux_demo import build_demo_flux  # noqa: E402
from nodes.models.flux_text import load_text_encoder  # noqa: E402
from nodes.models.flux_vae import load_vae  # noqa: E402

__all__ = ["build_demo_flux", "is_flux_state_dict", "load_diffusion_model", "load_text_encoder", "load_vae"]
