"""Stable Diffusion 3 / 3.5 diffusion models (MMDiT) from ComfyUI/Stability single files.

The network is diffusers' SD3Transformer2DModel with a config read from the tensor shapes (ComfyUI's rule:
64-wide heads, as many as the width allows). `apply` takes ComfyUI's view of the model: a [B,16,H,W] latent,
the timestep sigma * 1000, the text tokens as context and the pooled vector, and pads odd sizes as ComfyUI's
MMDiT does. SD3 samples as discrete flow with shift 3.0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from diffusers import SD3Transformer2DModel

from cluster.refs import ModelRef
from nodes.arch import sampling_config
from nodes.models.components import SD3_LATENT, DiffusionModel
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.safetensors_io import build_module
from nodes.models.sd3_keys import MARKER, block_indices, mmdit_to_diffusers

HEAD_DIM = 64  # ComfyUI's MMDiT: hidden size = 64 * depth, depth heads


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """SD3Transformer2DModel's config from a diffusers-layout state dict's shapes."""
    hidden, in_channels, patch, _ = sd["pos_embed.proj.weight"].shape
    if hidden % HEAD_DIM:
        raise ValueError(f"MMDiT width {hidden} is not a multiple of {HEAD_DIM}")
    blocks = block_indices(sd, "transformer_blocks")
    num_patches = sd["pos_embed.pos_embed"].shape[1]
    side = math.isqrt(num_patches)
    if side * side != num_patches:
        raise ValueError(f"the position embedding's {num_patches} patches are not a square grid")
    return {
        "sample_size": side * patch,
        "patch_size": int(patch),
        "in_channels": int(in_channels),
        "num_layers": len(blocks),
        "attention_head_dim": HEAD_DIM,
        "num_attention_heads": int(hidden // HEAD_DIM),
        "joint_attention_dim": int(sd["context_embedder.weight"].shape[1]),
        "caption_projection_dim": int(sd["context_embedder.weight"].shape[0]),
        "pooled_projection_dim": int(sd["time_text_embed.text_embedder.linear_1.weight"].shape[1]),
        # A ControlNet has no output projection (its out_channels are unused).
        "out_channels": int(sd["proj_out.weight"].shape[0] // (patch * patch))
        if "proj_out.weight" in sd
        else int(in_channels),
        "pos_embed_max_size": side,
        "dual_attention_layers": tuple(n for n in blocks if f"transformer_blocks.{n}.attn2.to_q.weight" in sd),
        "qk_norm": "rms_norm" if "transformer_blocks.0.attn.norm_q.weight" in sd else None,
    }


@dataclass
class SD3DiffusionModel(DiffusionModel):
    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        module: SD3Transformer2DModel = self.module
        device, dtype = x.device, self.dtype
        b, _, h, w = x.shape
        p = module.config.patch_size
        # Odd sizes: ComfyUI's patch embedding pads circularly to whole patches; the output is cropped back.
        x = F.pad(x, (0, (-w) % p, 0, (-h) % p), mode="circular")
        pooled = cond.get("pooled")
        if pooled is None:
            raise ValueError("SD3 needs the pooled text vector: encode the prompt with an SD3 text encoder")
        t = torch.as_tensor(timestep, dtype=torch.float32, device=device).reshape(-1)
        out = module(
            hidden_states=x.to(dtype),
            encoder_hidden_states=cond["context"].to(device, dtype),
            pooled_projections=pooled.to(device, dtype),
            timestep=t.expand(b) if t.numel() == 1 else t,
            block_controlnet_hidden_states=self._control(cond.get("control"), x),
            return_dict=False,
        )[0]
        return out[:, :, :h, :w].float()

    def _control(self, control: Any, x: torch.Tensor) -> list[torch.Tensor] | None:
        """SD3 ControlNet residuals as one tensor per joint block (zeros where none), so that diffusers adds
        residual i after block i, as ComfyUI's MMDiT does (neither adds one after the last block)."""
        if control is None:
            return None
        blocks = getattr(control, "blocks", None)
        if blocks is None:
            raise ValueError("this ControlNet is not an SD3 ControlNet")
        cfg = self.module.config
        n = len(self.module.transformer_blocks)
        tokens = (x.shape[-2] // cfg.patch_size) * (x.shape[-1] // cfg.patch_size)  # x is padded to whole patches
        zero = torch.zeros(
            x.shape[0], tokens, cfg.num_attention_heads * cfg.attention_head_dim, device=x.device, dtype=self.dtype
        )
        return [
            blocks[i].to(x.device, self.dtype) if i < len(blocks) and blocks[i] is not None else zero for i in range(n)
        ]


def to_diffusers_layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    prefix = find_prefix(state_dict.keys(), MARKER)
    if prefix is None:
        raise ValueError("not an MMDiT state dict (no joint_blocks)")
    sd = strip_prefix(state_dict, prefix)
    if "pos_embed" not in sd:
        raise ValueError("the MMDiT has no position embedding (pos_embed)")
    return mmdit_to_diffusers(sd)


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> SD3DiffusionModel:
    """An SD3 DiffusionModel from a checkpoint (`model.diffusion_model.` prefix) or a bare MMDiT file."""
    path = ref.sources[0] if ref.sources else None
    if ref.patches:
        raise ModelLoadError(path, "LoRAs on SD3 diffusion models are not supported yet")
    try:
        sd = to_diffusers_layout(state_dict)
        config = infer_config(sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable SD3 MMDiT: {e}") from None
    dtype = sd["pos_embed.proj.weight"].dtype
    module = build_module(lambda: SD3Transformer2DModel(**config), sd, path, "SD3 MMDiT", dtype=dtype)
    return SD3DiffusionModel(
        arch="sd3",
        module=module,
        latent_format=SD3_LATENT,
        sampling=dict(sampling_config("sd3")),
        config=config,
        dtype=dtype,
    )


# The loader (nodes.models.loader) finds every SD3 entry point on this module.
from nodes.models.flux_vae import load_vae  # noqa: E402
from nodes.models.sd3_controlnet import load_controlnet  # noqa: E402
from nodes.models.sd3_text import load_text_encoder  # noqa: E402

__all__ = ["infer_config", "load_controlnet", "load_diffusion_model", "load_text_encoder", "load_vae"]
