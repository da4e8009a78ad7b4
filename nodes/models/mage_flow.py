"""Mage-Flow diffusion models (Microsoft's Mage-Flow, Mage-Flow-Turbo and Mage-Flow-Edit, the files Comfy-Org/Mage-Flow
publishes: diffusion_models/mage_flow*_int8_convrot.safetensors, Qwen-Image's names, bare).

The network is Qwen-Image's dual-stream MMDiT at 12 blocks, run here on diffusers' Qwen-Image layers
(QwenImageTransformer2DModel built with patch size 1, so every key and shape is the published file's). As the newest
ComfyUI source computes it (comfy/ldm/mage_flow/model.py at dd5f2bc5, comfy/model_base.py's MageFlow):
- one token per latent cell of the 128-channel latent (no 2x2 packing);
- image tokens at (index, row - ceil(h/2), column - ceil(w/2)): the target at index 0, the n-th reference
  latent (TextEncodeMageFlowEdit's `reference_latents`) at index n, each at its own size; text tokens are not
  rotated (position 0 on every axis);
- the timestep (sigma, multiplier 1) is rounded to bfloat16 before the model (model_base.MageFlow's
  process_timestep, on every device) and the 128 sinusoid frequencies are rounded to bfloat16 as well; the
  products, sines and cosines are computed in float32, cosines first;
- samples as ComfyUI's ModelSamplingDiscreteFlow at shift 6 (supported_models.MageFlow), FLUX.2's latent format.
The three published variants share this layout; only the weights (and the templates' steps and cfg) differ.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from diffusers import QwenImageTransformer2DModel

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models import comfy_quant
from nodes.models.components import DiffusionModel
from nodes.models.detect import MAGE_FLOW_CHANNELS, QWEN_IMAGE_MARKER
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import count_blocks, find_prefix, strip_prefix
from nodes.models.lora import merge_loras
from nodes.models.qwen_image import ROPE_AXES, ComfyRotaryPositions, lora_targets
from nodes.models.safetensors_io import build_module

ARCH = "mage_flow"
FREQUENCIES = 128  # half of the 256-wide sinusoid the timestep MLP reads


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """QwenImageTransformer2DModel's arguments (patch size 1) from an unprefixed Mage-Flow state dict's shapes."""
    inner, in_channels = sd["img_in.weight"].shape
    head_dim = int(sd["transformer_blocks.0.attn.norm_q.weight"].shape[0])
    if head_dim != sum(ROPE_AXES):
        raise ValueError(f"head width {head_dim}: Mage-Flow's rotary positions need {sum(ROPE_AXES)}-wide heads")
    if inner % head_dim:
        raise ValueError(f"width {inner} is not a multiple of the head width {head_dim}")
    return {
        "patch_size": 1,
        "in_channels": int(in_channels),
        "out_channels": int(sd["proj_out.weight"].shape[0]),
        "num_layers": count_blocks(sd, "transformer_blocks"),
        "attention_head_dim": head_dim,
        "num_attention_heads": int(inner // head_dim),
        "joint_attention_dim": int(sd["txt_in.weight"].shape[1]),
        "axes_dims_rope": ROPE_AXES,
    }


def timestep_sinusoid(timestep: torch.Tensor) -> torch.Tensor:
    """[B] sigmas -> [B, 256]: cos then sin of 1000 * t * f, with t and the frequencies f rounded to bfloat16 as
    ComfyUI's Mage-Flow rounds them, the arithmetic in float32."""
    t = timestep.to(torch.bfloat16).float()
    steps = torch.arange(FREQUENCIES, dtype=torch.float32, device=timestep.device)
    freqs = torch.exp(-math.log(10000) * steps / FREQUENCIES).to(torch.bfloat16).float()
    angles = 1000.0 * (t[:, None] * freqs[None, :])
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)


def image_positions(index: int, h: int, w: int) -> torch.Tensor:
    """[h*w, 3] (index, row, column) positions of one latent's tokens, centred as Mage-Flow centres them."""
    rows = torch.arange(h, dtype=torch.float32) - (h - h // 2)
    cols = torch.arange(w, dtype=torch.float32) - (w - w // 2)
    grid = torch.stack(
        [torch.full((h, w), float(index)), rows[:, None].expand(h, w), cols[None, :].expand(h, w)], dim=-1
    )
    return grid.reshape(-1, 3)


def _tokens(latent: torch.Tensor, what: str) -> torch.Tensor:
    if latent.dim() == 5:
        if latent.shape[2] != 1:
            raise ValueError(f"Mage-Flow takes single images; this {what} has {latent.shape[2]} frames")
        latent = latent[:, :, 0]
    if latent.dim() != 4:
        raise ValueError(f"Mage-Flow takes [B,C,H,W] latents; this {what} is {tuple(latent.shape)}")
    return latent.movedim(1, -1).reshape(latent.shape[0], -1, latent.shape[1])


@dataclass
class MageFlowDiffusionModel(DiffusionModel):
    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control") is not None:
            raise ValueError("ControlNets are not supported on Mage-Flow models")
        module: QwenImageTransformer2DModel = self.module
        squeeze = x.dim() == 5
        if squeeze:
            x = x[:, :, 0] if x.shape[2] == 1 else x
        b, channels, h, w = x.shape
        if channels != module.config.in_channels:
            raise ValueError(
                f"latent has {channels} channels but this Mage-Flow model takes {module.config.in_channels}"
            )
        device, dtype = x.device, self.dtype
        tokens = [_tokens(x.to(dtype), "latent")]
        positions = [image_positions(0, h, w)]
        for n, ref in enumerate(cond.get("ref_latents") or (), start=1):
            ref_tokens = _tokens(ref.to(device, dtype), "reference latent")
            tokens.append(ref_tokens.expand(b, -1, -1) if ref_tokens.shape[0] == 1 else ref_tokens)
            positions.append(image_positions(n, *ref.shape[-2:]))
        context = cond["context"].to(device, dtype)
        t = torch.as_tensor(timestep, dtype=torch.float32, device=device).reshape(-1)
        t = t.expand(b) if t.numel() == 1 else t
        out = forward(module, torch.cat(tokens, dim=1), context, t, torch.cat(positions))
        out = out[:, : h * w].float().reshape(b, h, w, -1).movedim(-1, 1)
        return out[:, :, None] if squeeze else out


def forward(
    module: QwenImageTransformer2DModel,
    hidden: torch.Tensor,
    context: torch.Tensor,
    t: torch.Tensor,
    positions: torch.Tensor,
) -> torch.Tensor:
    """The Mage-Flow forward on diffusers' Qwen-Image layers: image tokens `hidden` [B,N,C] at `positions` [N,3],
    text `context` [B,T,D] unrotated, sigmas `t` [B]; returns [B,N,C_out]."""
    rope: ComfyRotaryPositions = module.pos_embed
    image_freqs = rope.positions_freqs(positions).to(hidden.device)
    text_freqs = rope.positions_freqs(torch.zeros(context.shape[1], 3)).to(hidden.device)
    x = module.img_in(hidden)
    txt = module.txt_in(module.txt_norm(context))
    temb = module.time_text_embed.timestep_embedder(timestep_sinusoid(t).to(x.dtype))
    for block in module.transformer_blocks:
        txt, x = block(
            hidden_states=x,
            encoder_hidden_states=txt,
            encoder_hidden_states_mask=None,
            temb=temb,
            image_rotary_emb=(image_freqs, text_freqs),
        )
    return module.proj_out(module.norm_out(x, temb))


def to_diffusers_layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    prefix = find_prefix(state_dict.keys(), QWEN_IMAGE_MARKER)
    if prefix is None:
        raise ValueError("not a Mage-Flow state dict (no txt_norm)")
    return strip_prefix(state_dict, prefix)


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> MageFlowDiffusionModel:
    """A Mage-Flow DiffusionModel from a bare or `model.diffusion_model.`-prefixed file (ComfyUI's int8 ConvRot
    files dequantized once), LoRAs merged under Qwen-Image's names; float32 on a CPU, as ComfyUI runs it."""
    path = ref.sources[0] if ref.sources else None
    if comfy_quant.is_quantized(state_dict):
        state_dict = comfy_quant.dequantize(state_dict, path, torch.float32)
    try:
        sd = to_diffusers_layout(state_dict)
        config = infer_config(sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Mage-Flow transformer: {e}") from None
    if config["in_channels"] != MAGE_FLOW_CHANNELS:
        raise ModelLoadError(path, f"img_in reads {config['in_channels']} channels; Mage-Flow's latents have 128")
    if ref.patches:
        sd, _ = merge_loras(ref.patches, lora_targets(sd), sd)
    module = build_module(lambda: QwenImageTransformer2DModel(**config), sd, path, "Mage-Flow transformer")
    module.pos_embed = ComfyRotaryPositions(config["axes_dims_rope"])
    return MageFlowDiffusionModel(
        arch=ARCH,
        module=module,
        latent_format=latent_format(ARCH),
        sampling=dict(sampling_config(ARCH)),
        config=config,
    )


# The loader (nodes.models.loader) finds every Mage-Flow entry point on this module.
from nodes.models.mage_flow_text import load_text_encoder  # noqa: E402
from nodes.models.mage_flow_vae import load_vae  # noqa: E402

__all__ = ["infer_config", "load_diffusion_model", "load_text_encoder", "load_vae", "timestep_sinusoid"]
