"""Anima diffusion models (circlestone-labs/Anima: anima-preview*, anima-base-v1.0 in diffusion_models/).

Anima is NVIDIA's Cosmos Predict2 image DiT (ComfyUI's MiniTrainDIT) with an LLM adapter in front: a small
transformer that embeds the prompt's T5 token ids, attends to the Qwen3 0.6B text encoder's last hidden states
and gives the DiT its cross-attention context, zero-padded to 512 rows. Read from ComfyUI's source (0.10.0 and the
newest: comfy/ldm/anima/model.py, comfy/ldm/cosmos/predict2.py, model_base.Anima, supported_models.Anima,
model_detection.py): the file layout is ComfyUI's (`net.` or `model.diffusion_model.` prefix or none;
`blocks.N.self_attn.q_proj`, ..., `llm_adapter.blocks.N.cross_attn.q_proj`); it is detected by
`blocks.0.mlp.layer1.weight` with `llm_adapter.blocks.0.cross_attn.q_proj.weight`; sampling is discrete flow at
shift 3 with sigma as the timestep; latents are Qwen-Image's (the Wan 2.1 VAE, one frame: [B,16,1,H,W]).

The DiT runs on diffusers' CosmosTransformer3DModel (diffusers' own Cosmos 2.0 converter renames the keys), the
adapter on our module below (no library has it). Sizes come from the shapes; ComfyUI fixes what no shape
carries: 2x2 patches, RoPE extrapolated x4 in height and width, norms at eps 1e-6. The numbers are checked
against ComfyUI 0.10.0 on the tiny demo files (tests/models/test_anima.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models.components import DiffusionModel
from nodes.models.detect import ANIMA_MARKERS, ANIMA_PREFIXES
from nodes.models.flux_keys import count_blocks, strip_prefix
from nodes.models.lora import LoraTargets
from nodes.models.single_file import load_single_file_transformer

PATCH = 2
CONTEXT_ROWS = 512  # model_base.Anima pads the adapter's output to this many rows with zeros
EPS = 1e-6
ROPE_THETA = 10000.0
T5_VOCAB = 32128  # the adapter's token embedding: T5's ids


def find_anima_prefix(keys) -> str | None:
    keys = set(keys)
    return next((p for p in ANIMA_PREFIXES if all(p + m in keys for m in ANIMA_MARKERS)), None)


def anima_layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The file's tensors under ComfyUI's unprefixed names."""
    prefix = find_anima_prefix(state_dict.keys())
    if prefix is None:
        raise ValueError(f"not an Anima state dict (no {' with '.join(ANIMA_MARKERS)})")
    return strip_prefix(state_dict, prefix)


def to_module_layout(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """ComfyUI's names -> AnimaNetwork's: the DiT's through diffusers' Cosmos 2.0 converter under `dit.`, the
    adapter's unchanged (the converter's substring renames would touch its `blocks` and `q_proj`)."""
    from diffusers.loaders.single_file_utils import convert_cosmos_transformer_checkpoint_to_diffusers

    adapter = {k: v for k, v in sd.items() if k.startswith("llm_adapter.")}
    dit = convert_cosmos_transformer_checkpoint_to_diffusers({k: v for k, v in sd.items() if k not in adapter})
    return {**{"dit." + k: v for k, v in dit.items()}, **adapter}


def lora_targets(sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    """The names an Anima LoRA gives a layer (ComfyUI's names, bare, under `diffusion_model.` or kohya's
    `lora_unet_` with underscores) for a state dict in ComfyUI's unprefixed names."""
    targets = LoraTargets(("lora_unet_", "diffusion_model.") + tuple(sorted({k.split(".")[0] + "." for k in sd})), {})
    for key, value in sd.items():
        if key.endswith(".weight") and value.dim() == 2:
            name = key[: -len(".weight")]
            targets.add(key, name, "diffusion_model." + name, "lora_unet_" + name.replace(".", "_"))
    return targets


def _heads(width: int, head_dim: int, what: str) -> int:
    if width % head_dim:
        raise ValueError(f"{what} width {width} is not a multiple of its head width {head_dim}")
    return width // head_dim


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """AnimaNetwork's config from the module-layout state dict's shapes."""
    hidden, patch_in = sd["dit.patch_embed.proj.weight"].shape
    head_dim = int(sd["dit.transformer_blocks.0.attn1.norm_q.weight"].shape[0])
    in_channels = patch_in // (PATCH * PATCH)  # the latent's channels and ComfyUI's padding-mask channel
    if in_channels != 17:
        raise ValueError(f"the patch embedding takes {in_channels} channels; Anima's take 16 and a padding mask")
    adapter_dim = int(sd["llm_adapter.out_proj.weight"].shape[1])
    adapter_head = int(sd["llm_adapter.blocks.0.self_attn.q_norm.weight"].shape[0])
    dit = {
        "in_channels": int(in_channels),
        "out_channels": int(sd["dit.proj_out.weight"].shape[0]) // (PATCH * PATCH),
        "num_attention_heads": _heads(int(hidden), head_dim, "model"),
        "attention_head_dim": head_dim,
        "num_layers": count_blocks(sd, "dit.transformer_blocks"),
        "mlp_ratio": sd["dit.transformer_blocks.0.ff.net.0.proj.weight"].shape[0] / hidden,
        "text_embed_dim": int(sd["dit.transformer_blocks.0.attn2.to_k.weight"].shape[1]),
        "adaln_lora_dim": int(sd["dit.transformer_blocks.0.norm1.linear_1.weight"].shape[0]),
        # ComfyUI computes the rotary table for any size (max(H, W, T) positions); diffusers only up to max_size.
        "max_size": (128, 1 << 14, 1 << 14),
        "patch_size": (1, PATCH, PATCH),
        "rope_scale": (1.0, 4.0, 4.0),  # ComfyUI's 16-channel Predict2: t 1, h and w extrapolated x4
        # The padding-mask channel (zeros) is joined here, not by diffusers, whose resize needs torchvision.
        "concat_padding_mask": False,
        "extra_pos_embed_type": None,
    }
    adapter = {
        "vocab": int(sd["llm_adapter.embed.weight"].shape[0]),
        "source_dim": int(sd["llm_adapter.blocks.0.cross_attn.k_proj.weight"].shape[1]),
        "target_dim": int(sd["llm_adapter.embed.weight"].shape[1]),
        "model_dim": adapter_dim,
        "num_layers": count_blocks(sd, "llm_adapter.blocks"),
        "num_heads": _heads(adapter_dim, adapter_head, "LLM adapter"),
        "mlp_dim": int(sd["llm_adapter.blocks.0.mlp.0.weight"].shape[0]),
        "self_attn": "llm_adapter.blocks.0.self_attn.q_proj.weight" in sd,
    }
    return {"dit": dit, "adapter": adapter}


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def rotary(positions: int, head_dim: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) [positions, head_dim] of the adapter's rotary embedding (theta 10000, halves rotated)."""
    inv = 1.0 / (ROPE_THETA ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    freqs = torch.outer(torch.arange(positions, dtype=torch.float32), inv)
    emb = torch.cat((freqs, freqs), dim=-1).to(device)
    return emb.cos().to(dtype), emb.sin().to(dtype)


class AdapterAttention(nn.Module):
    """Multi-head attention with per-head RMS norms on queries and keys, rotary on both (queries at the target's
    positions, keys at the context's), no biases."""

    def __init__(self, dim: int, context_dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(context_dim, dim, bias=False)
        self.v_proj = nn.Linear(context_dim, dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)
        self.q_norm = nn.RMSNorm(self.head_dim, eps=EPS)
        self.k_norm = nn.RMSNorm(self.head_dim, eps=EPS)

    def forward(self, x: torch.Tensor, context: torch.Tensor, rope_x, rope_context) -> torch.Tensor:
        b, n, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(b, n, self.heads, -1)).transpose(1, 2)
        k = self.k_norm(self.k_proj(context).view(b, context.shape[1], self.heads, -1)).transpose(1, 2)
        v = self.v_proj(context).view(b, context.shape[1], self.heads, -1).transpose(1, 2)
        q = q * rope_x[0] + _rotate_half(q) * rope_x[1]
        k = k * rope_context[0] + _rotate_half(k) * rope_context[1]
        out = F.scaled_dot_product_attention(q, k, v)
        return self.o_proj(out.transpose(1, 2).reshape(b, n, -1))


class AdapterBlock(nn.Module):
    def __init__(self, source_dim: int, dim: int, heads: int, mlp_dim: int, self_attn: bool) -> None:
        super().__init__()
        if self_attn:
            self.norm_self_attn = nn.RMSNorm(dim, eps=EPS)
            self.self_attn = AdapterAttention(dim, dim, heads)
        self.norm_cross_attn = nn.RMSNorm(dim, eps=EPS)
        self.cross_attn = AdapterAttention(dim, source_dim, heads)
        self.norm_mlp = nn.RMSNorm(dim, eps=EPS)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_dim), nn.GELU(), nn.Linear(mlp_dim, dim))

    def forward(self, x: torch.Tensor, context: torch.Tensor, rope_x, rope_context) -> torch.Tensor:
        if hasattr(self, "self_attn"):
            h = self.norm_self_attn(x)
            x = x + self.self_attn(h, h, rope_x, rope_x)
        x = x + self.cross_attn(self.norm_cross_attn(x), context, rope_x, rope_context)
        return x + self.mlp(self.norm_mlp(x))


class LLMAdapter(nn.Module):
    """Anima's text adapter: the prompt's T5 token ids, embedded, attend to the Qwen3 states (the source) through
    a few blocks; projected and RMS-normed they are the DiT's context."""

    def __init__(
        self,
        vocab: int,
        source_dim: int,
        target_dim: int,
        model_dim: int,
        num_layers: int,
        num_heads: int,
        mlp_dim: int,
        self_attn: bool = True,
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, target_dim)
        self.in_proj = nn.Identity() if model_dim == target_dim else nn.Linear(target_dim, model_dim)
        self.head_dim = model_dim // num_heads
        self.blocks = nn.ModuleList(
            AdapterBlock(source_dim, model_dim, num_heads, mlp_dim, self_attn) for _ in range(num_layers)
        )
        self.out_proj = nn.Linear(model_dim, target_dim)
        self.norm = nn.RMSNorm(target_dim, eps=EPS)

    def forward(self, source: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        x = self.in_proj(self.embed(ids).to(source.dtype))
        rope_x = rotary(x.shape[1], self.head_dim, x.device, x.dtype)
        rope_source = rotary(source.shape[1], self.head_dim, x.device, x.dtype)
        for block in self.blocks:
            x = block(x, source, rope_x, rope_source)
        return self.norm(self.out_proj(x))


class AnimaNetwork(nn.Module):
    """The file's two networks: the Cosmos Predict2 DiT (diffusers') and the LLM adapter."""

    def __init__(self, dit: dict[str, Any], adapter: dict[str, Any]) -> None:
        super().__init__()
        from diffusers import CosmosTransformer3DModel

        self.dit = CosmosTransformer3DModel(**dit)
        for module in self.dit.modules():  # diffusers' q/k norms default to eps 1e-5; Cosmos' are 1e-6
            if type(module).__name__ == "RMSNorm":
                module.eps = EPS
        self.llm_adapter = LLMAdapter(**adapter)


def adapter_context(network: AnimaNetwork, states: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor | None):
    """model_base.Anima's cross-attention context: the adapter's output for the T5 ids over the Qwen3 states,
    each row times its prompt weight, zero-padded to 512 rows."""
    out = network.llm_adapter(states, ids)
    if weights is not None:
        out = out * weights.unsqueeze(-1).to(out)
    if out.shape[1] < CONTEXT_ROWS:
        out = F.pad(out, (0, 0, 0, CONTEXT_ROWS - out.shape[1]))
    return out


@dataclass
class AnimaDiffusionModel(DiffusionModel):
    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control"):
            raise NotImplementedError("ControlNets are not supported for Anima models")
        if cond.get("ref_latents"):
            raise NotImplementedError("reference latents are not supported for Anima models")
        network: AnimaNetwork = self.module
        frames = x.dim() == 5  # ComfyUI's latents for Anima carry a frame axis: [B,16,1,H,W]
        if not frames:
            x = x[:, :, None]
        b, _, t_len, h, w = x.shape
        device, dtype = x.device, self.dtype
        ids = cond.get("t5xxl_ids")
        if ids is None:
            raise ValueError(
                "Anima needs its text encoder's T5 token ids beside the conditioning: encode the prompt with "
                "CLIPLoader's Qwen3 0.6B (qwen_3_06b_base.safetensors)"
            )
        context = adapter_context(
            network, cond["context"].to(device, dtype), ids.to(device).long(), cond.get("t5xxl_weights")
        )
        context = context.expand(b, -1, -1) if context.shape[0] == 1 else context
        # ComfyUI pads odd sizes circularly to whole patches and crops the output back.
        padded = F.pad(x, (0, (-w) % PATCH, 0, (-h) % PATCH, 0, 0), mode="circular").to(dtype)
        mask = torch.zeros_like(padded[:, :1])  # the padding mask channel: nothing is padding
        t = torch.as_tensor(timestep, dtype=torch.float32, device=device).reshape(-1)
        t = t.expand(b) if t.numel() == 1 else t  # sigma, multiplier 1
        out = network.dit(
            hidden_states=torch.cat([padded, mask], dim=1),
            timestep=t.to(dtype),
            encoder_hidden_states=context,
            return_dict=False,
        )[0]
        out = out[:, :, :t_len, :h, :w].float()
        return out if frames else out[:, :, 0]


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> AnimaDiffusionModel:
    """An Anima DiffusionModel from its single file, LoRAs merged (LoraLoaderModelOnly: the turbo LoRA)."""
    module, config = load_single_file_transformer(
        ref,
        state_dict,
        what="Anima transformer",
        layout=anima_layout,
        lora_targets=lora_targets,
        convert=to_module_layout,
        infer_config=infer_config,
        model_class=AnimaNetwork,
    )
    dtype = next(module.parameters()).dtype
    return AnimaDiffusionModel(
        arch="anima",
        module=module,
        latent_format=latent_format("anima"),
        sampling=dict(sampling_config("anima")),
        config=config,
        dtype=dtype,
    )


# The loader (nodes.models.loader) finds every Anima entry point on this module; its VAE is Qwen-Image's.
from nodes.models.anima_text import load_text_encoder  # noqa: E402
from nodes.models.qwen_image import load_vae  # noqa: E402

__all__ = ["anima_layout", "infer_config", "load_diffusion_model", "load_text_encoder", "load_vae"]
