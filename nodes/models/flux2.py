"""FLUX.2 diffusion models (Klein 4B/9B and dev) from BFL/ComfyUI single files or diffusers layout.

The network is diffusers' Flux2Transformer2DModel; BFL keys go through diffusers' own single-file converter, and
the config is read from the tensor shapes. `apply` takes ComfyUI's view of the model: a [B,128,H/16,W/16] latent
(the VAE's 2x2 patches are already channels, so every latent pixel is one token), sigma as the timestep, the
stacked text-encoder states as context (left-padded with zeros to 512 tokens, as ComfyUI's Flux2 does), and
4-axis position ids (t, h, w, l): image tokens at (0, row, column, 0), text tokens at (0, 0, 0, index), reference
latents (editing) at (10 n, row, column, 0). In bfloat16 the time embedding is computed as ComfyUI computes it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from diffusers import Flux2Transformer2DModel
from diffusers.loaders.single_file_utils import convert_flux2_transformer_checkpoint_to_diffusers

from cluster.refs import ModelRef
from nodes.models.components import FLUX2_LATENT, DiffusionModel
from nodes.models.errors import ModelLoadError
from nodes.models.flux import per_batch, rope_image_ids
from nodes.models.flux_keys import count_blocks, find_prefix, strip_prefix
from nodes.models.safetensors_io import build_module

# BFL's marker of FLUX.2 (Flux.1 has per-block modulations instead), as ComfyUI's model_detection tells them apart.
BFL_MARKER = "double_stream_modulation_img.lin.weight"
DIFFUSERS_MARKER = "double_stream_modulation_img.linear.weight"
AXES_DIM = (32, 32, 32, 32)  # ComfyUI's and BFL's RoPE split of FLUX.2's 128-wide heads
ROPE_THETA = 2000
TEXT_TOKENS = 512  # ComfyUI's Flux2 pads shorter contexts to this many tokens (zeros, on the left)
REF_METHOD = "index"  # ComfyUI's default_ref_method for FLUX.2
REF_INDEX_SCALE = 10  # ComfyUI's ref_index_scale: references' time coordinates 10, 20, ...
DEFAULT_GUIDANCE = 3.5  # ComfyUI's value for a guidance-embedding model when the conditioning has none
SAMPLING = {"kind": "flux", "shift": 2.02}  # ComfyUI's supported_models.Flux2: ModelSamplingFlux, shift 2.02


def to_diffusers_layout(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The transformer's weights in diffusers layout, whatever the file's layout and prefix."""
    p = find_prefix(sd.keys(), BFL_MARKER)
    if p is not None:
        return convert_flux2_transformer_checkpoint_to_diffusers(strip_prefix(sd, p))
    p = find_prefix(sd.keys(), DIFFUSERS_MARKER)
    if p is not None:
        return strip_prefix(sd, p)
    raise ValueError("not a FLUX.2 transformer state dict (no double_stream_modulation_img weights)")


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Flux2Transformer2DModel's config from a diffusers-layout state dict's shapes."""
    inner, in_channels = sd["x_embedder.weight"].shape
    n_double = count_blocks(sd, "transformer_blocks")
    n_single = count_blocks(sd, "single_transformer_blocks")
    block = "transformer_blocks.0" if n_double else "single_transformer_blocks.0"
    head_dim = int(sd[f"{block}.attn.norm_k.weight"].shape[0])
    if head_dim != sum(AXES_DIM) or inner % head_dim:
        raise ValueError(
            f"FLUX.2 heads are {sum(AXES_DIM)} wide (RoPE axes {AXES_DIM}); this file has head dim "
            f"{head_dim} and hidden size {inner}"
        )
    mlp = (
        sd["transformer_blocks.0.ff.linear_out.weight"].shape[1]
        if n_double
        else sd["single_transformer_blocks.0.attn.to_out.weight"].shape[1] - inner
    )
    return {
        "patch_size": 1,
        "in_channels": int(in_channels),
        "out_channels": int(sd["proj_out.weight"].shape[0]),
        "num_layers": n_double,
        "num_single_layers": n_single,
        "attention_head_dim": head_dim,
        "num_attention_heads": int(inner // head_dim),
        "joint_attention_dim": int(sd["context_embedder.weight"].shape[1]),
        "timestep_guidance_channels": int(sd["time_guidance_embed.timestep_embedder.linear_1.weight"].shape[1]),
        "mlp_ratio": mlp / inner,
        "axes_dims_rope": AXES_DIM,
        "rope_theta": ROPE_THETA,
        "guidance_embeds": "time_guidance_embed.guidance_embedder.linear_1.weight" in sd,
    }


def image_ids(h: int, w: int, device: torch.device) -> torch.Tensor:
    """[h*w, 4] position ids (t, row, column, l) of the image tokens, row-major."""
    ids = torch.zeros(h, w, len(AXES_DIM), device=device)
    ids[..., 1] = torch.arange(h, device=device, dtype=torch.float32)[:, None]
    ids[..., 2] = torch.arange(w, device=device, dtype=torch.float32)[None, :]
    return ids.reshape(h * w, len(AXES_DIM))


def text_ids(n: int, device: torch.device) -> torch.Tensor:
    """[n, 4] position ids of the text tokens: their index on the last axis (ComfyUI's txt_ids_dims [3])."""
    ids = torch.zeros(n, len(AXES_DIM), device=device)
    ids[:, 3] = torch.arange(n, device=device, dtype=torch.float32)
    return ids


def _tokens(x: torch.Tensor) -> torch.Tensor:
    """[B,C,H,W] -> [B,H*W,C]: every latent pixel is a token."""
    return x.reshape(x.shape[0], x.shape[1], -1).transpose(1, 2)


def reference_tokens(
    refs: list[torch.Tensor], method: str | None, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference latents (model space, [B,128,h,w] each) as tokens to append to the image's, with their ids:
    FLUX.2's "index" placement (ComfyUI's default for FLUX.2, diffusers' Klein pipeline): the i-th reference at
    time coordinate 10 * (i + 1), its own rows and columns from 0."""
    if (method or REF_METHOD) != REF_METHOD:
        raise NotImplementedError(
            f"reference latents method {method!r} is not supported for FLUX.2 yet ({REF_METHOD!r} is)"
        )
    tokens, ids = [], []
    for i, ref in enumerate(refs):
        tokens.append(_tokens(ref.to(dtype)))
        ref_ids = image_ids(ref.shape[-2], ref.shape[-1], ref.device)
        ref_ids[:, 0] = REF_INDEX_SCALE * (i + 1)
        ids.append(ref_ids)
    return torch.cat(tokens, dim=1), torch.cat(ids)


def pad_context(context: torch.Tensor) -> torch.Tensor:
    """ComfyUI's Flux2.extra_conds: a context shorter than 512 tokens gets zero rows in front."""
    short = TEXT_TOKENS - context.shape[1]
    return F.pad(context, (0, 0, short, 0)) if short > 0 else context


@dataclass
class Flux2DiffusionModel(DiffusionModel):
    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control") is not None:
            raise NotImplementedError("ControlNet is not supported for FLUX.2 models yet")
        module: Flux2Transformer2DModel = self.module
        device, dtype = x.device, self.dtype
        b, c, h, w = x.shape
        tokens, ids = _tokens(x.to(dtype)), image_ids(h, w, device)
        if cond.get("rope_options"):  # ScaleROPE
            ids = rope_image_ids(h, w, cond["rope_options"], len(AXES_DIM), device)
        if cond.get("ref_latents"):  # ReferenceLatent (editing): references join the image tokens
            ref_tokens, ref_ids = reference_tokens(cond["ref_latents"], cond.get("ref_latents_method"), dtype)
            tokens = torch.cat([tokens, ref_tokens.expand(b, -1, -1)], dim=1)
            ids = torch.cat([ids, ref_ids])
        context = pad_context(cond["context"].to(device, dtype))
        guidance = None
        if module.config.guidance_embeds and not cond.get("guidance_disabled"):
            g = cond.get("guidance")
            guidance = per_batch(DEFAULT_GUIDANCE if g is None else g, b, device)
        sigma = per_batch(timestep, b, device)
        _exact.values = (sigma * 1000, None if guidance is None else guidance * 1000)
        try:
            out = module(
                hidden_states=tokens,
                encoder_hidden_states=context,
                timestep=sigma,  # the module scales it by 1000 (in its own dtype: see exact_time_embedding)
                img_ids=ids,
                txt_ids=text_ids(context.shape[1], device),
                guidance=guidance,
                return_dict=False,
            )[0]
        finally:
            _exact.values = None
        return out[:, : h * w].transpose(1, 2).reshape(b, -1, h, w).float()


_exact = threading.local()


def _time_guidance_embedding(
    embed: torch.nn.Module, timestep: torch.Tensor, guidance: torch.Tensor | None
) -> torch.Tensor:
    """diffusers' Flux2TimestepGuidanceEmbeddings.forward in ComfyUI's precision: the sinusoids of sigma x 1000
    and guidance x 1000 computed in float32 from this thread's exact values, then cast to the weights' dtype.
    (diffusers first casts sigma and sigma x 1000 to the weights' dtype: in bfloat16 the last sigma of Klein's
    4-step schedule embeds as 764, not 767.2.) Float32 weights give diffusers' result bit for bit."""
    exact = getattr(_exact, "values", None)
    if exact is not None:
        timestep, guidance = exact[0], (exact[1] if guidance is not None else None)
    dtype = embed.timestep_embedder.linear_1.weight.dtype
    emb = embed.timestep_embedder(embed.time_proj(timestep).to(dtype))
    if guidance is not None and embed.guidance_embedder is not None:
        emb = emb + embed.guidance_embedder(embed.time_proj(guidance).to(dtype))
    return emb


def exact_time_embedding(module: Flux2Transformer2DModel) -> Flux2Transformer2DModel:
    embed = module.time_guidance_embed
    embed.forward = functools.partial(_time_guidance_embedding, embed)
    return module


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> Flux2DiffusionModel:
    """A FLUX.2 DiffusionModel from a state dict in BFL (optionally `model.diffusion_model.`-prefixed) or
    diffusers layout."""
    path = ref.sources[0] if ref.sources else None
    try:
        sd = to_diffusers_layout(state_dict)
        config = infer_config(sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable FLUX.2 transformer: {e}") from None
    dtype = sd["x_embedder.weight"].dtype
    module = exact_time_embedding(
        build_module(lambda: Flux2Transformer2DModel(**config), sd, path, "FLUX.2 transformer", dtype=dtype)
    )
    return Flux2DiffusionModel(
        arch="flux2", module=module, latent_format=FLUX2_LATENT, sampling=dict(SAMPLING), config=config, dtype=dtype
    )
