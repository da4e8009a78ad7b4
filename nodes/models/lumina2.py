"""Lumina 2 (Lumina-Image-2.0, Neta Lumina, NetaYume Lumina): ComfyUI's NextDiT under its names (`x_embedder`,
`cap_embedder`, `layers.N.attention.qkv`, `layers.N.adaLN_modulation.1`, ...), bare or under
`model.diffusion_model.`, alone or in an all-in-one checkpoint with the Gemma 2 encoder under `text_encoders.`
and the Flux VAE under `vae.` (ComfyUI's supported_models.Lumina2 prefixes; the NetaYume template's
NetaYumev35_pretrained_all_in_one.safetensors is such a file).

Told from Z-Image (the same NextDiT design, nodes.models.zimage) by its modulation: SiLU then Linear, so the
Linear is `adaLN_modulation.1` (Z-Image's is `.0`). The network is diffusers' Lumina2Transformer2DModel; sizes
come from the shapes: the head width from the q norm (96 for the released 2304-wide model: ComfyUI's 24 heads,
8 kv heads and RoPE axes 32/32/32), the kv heads from the fused qkv. `apply` takes ComfyUI's view: a [B,16,H,W]
latent (Flux's latent format), sigma as the timestep (flow, multiplier 1, shift 6), the Gemma hidden states as
context; the network sees 1 - sigma and ComfyUI's NextDiT returns the negated output, so `apply` does too."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from cluster.refs import ModelRef
from nodes.arch import sampling_config
from nodes.models.components import FLUX_LATENT, DiffusionModel
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix
from nodes.models.lora import LoraTargets, merge_loras

MARKER = "layers.0.adaLN_modulation.1.weight"
EMBED_MARKER = "cap_embedder.1.weight"
PATCH = 2
AXES = {96: (32, 32, 32)}  # head width -> RoPE axes (ComfyUI's for the 2304-wide model)
# Position tables long enough for any prompt and image (diffusers precomputes them; ComfyUI computes each
# position's rotation directly, which does not depend on the table's length).
AXES_LENS = (8192, 4096, 4096)


def find_lumina2_prefix(keys) -> str | None:
    keys = list(keys)
    p = find_prefix(keys, MARKER)
    return p if p is not None and f"{p}{EMBED_MARKER}" in keys else None


def split_qkv(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """ComfyUI's fused `attention.qkv` as to_q/to_k/to_v, sized by the model's width (diffusers' converter
    assumes the released 2304/768/768)."""
    dim = sd["x_embedder.weight"].shape[0]
    out: dict[str, torch.Tensor] = {}
    for k, v in sd.items():
        if k.endswith(".attention.qkv.weight"):
            kv = (v.shape[0] - dim) // 2
            q, key, val = torch.split(v, [dim, kv, kv])
            base = k[: -len("qkv.weight")]
            out.update({base + "to_q.weight": q, base + "to_k.weight": key, base + "to_v.weight": val})
        else:
            out[k] = v
    return out


def lora_targets(sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    """The names ComfyUI 0.3.64 accepts for a Lumina 2 LoRA's layers (comfy/lora.py's model_lora_keys_unet: its
    own NextDiT names under `diffusion_model.`, or kohya's `lora_unet_` with underscores), for a state dict in
    ComfyUI's unprefixed names: a LoRA on the fused `attention.qkv` is merged before the split, as ComfyUI does."""
    targets = LoraTargets(("lora_unet_", "diffusion_model."), {})
    for key, value in sd.items():
        if key.endswith(".weight") and value.dim() == 2:
            name = key[: -len(".weight")]
            targets.add(key, "diffusion_model." + name, "lora_unet_" + name.replace(".", "_"))
    return targets


def to_diffusers_layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """ComfyUI's NextDiT names -> diffusers' (its single-file conversion, after our own qkv split)."""
    from diffusers.loaders.single_file_utils import convert_lumina2_to_diffusers

    prefix = find_lumina2_prefix(state_dict.keys())
    if prefix is None:
        raise ValueError("not a Lumina 2 transformer (no cap_embedder / layers.0.adaLN_modulation.1 keys)")
    sd = split_qkv({k[len(prefix) :]: v for k, v in state_dict.items() if k.startswith(prefix)})
    return convert_lumina2_to_diffusers(sd)  # it pops what it converts: sd is ours


def _count(sd: Mapping[str, torch.Tensor], name: str) -> int:
    return len({k.split(".")[1] for k in sd if k.startswith(name + ".")})


def infer_config(sd: Mapping[str, torch.Tensor]) -> tuple[dict[str, Any], int]:
    """(Lumina2Transformer2DModel's config, the feed-forward width) from diffusers-named tensors."""
    dim, patch_in = sd["x_embedder.weight"].shape
    head_dim = int(sd["layers.0.attn.norm_q.weight"].shape[0])
    if dim % head_dim:
        raise ValueError(f"width {dim} is not a multiple of the head width {head_dim}")
    axes = AXES.get(head_dim)
    if axes is None:
        raise ValueError(f"no RoPE axes known for head width {head_dim} (Lumina 2's is 96)")
    refiners = _count(sd, "noise_refiner")
    if _count(sd, "context_refiner") != refiners:
        raise ValueError("the noise and context refiners have different depths")
    return {
        "patch_size": PATCH,
        "in_channels": int(patch_in // (PATCH * PATCH)),
        "hidden_size": int(dim),
        "num_layers": _count(sd, "layers"),
        "num_refiner_layers": refiners,
        "num_attention_heads": int(dim // head_dim),
        "num_kv_heads": int(sd["layers.0.attn.to_k.weight"].shape[0] // head_dim),
        "norm_eps": 1e-5,
        "axes_dim_rope": axes,
        "axes_lens": AXES_LENS,
        "cap_feat_dim": int(sd["time_caption_embed.caption_embedder.1.weight"].shape[1]),
    }, int(sd["layers.0.feed_forward.linear_1.weight"].shape[0])


def make_transformer(config: dict[str, Any], ffn: int, dtype: torch.dtype = torch.float32):
    """diffusers' Lumina2Transformer2DModel with the file's feed-forward width, and its q/k norms' epsilon as
    ComfyUI's (torch's RMSNorm default: the compute dtype's machine epsilon; diffusers fixes 1e-5)."""
    from diffusers import Lumina2Transformer2DModel
    from diffusers.models.attention import LuminaFeedForward

    model = Lumina2Transformer2DModel(**config)
    eps = torch.finfo(dtype).eps
    for block in [*model.noise_refiner, *model.context_refiner, *model.layers]:
        if block.feed_forward.linear_1.out_features != ffn:
            block.feed_forward = LuminaFeedForward(config["hidden_size"], ffn, multiple_of=1)
        block.attn.norm_q.eps = block.attn.norm_k.eps = eps
    return model


def _per_batch(v: torch.Tensor, batch: int) -> torch.Tensor:
    t = torch.as_tensor(v, dtype=torch.float32).reshape(-1)
    return t.expand(batch) if t.numel() == 1 else t


@dataclass
class Lumina2DiffusionModel(DiffusionModel):
    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control") is not None:
            raise NotImplementedError("ControlNet is not supported for Lumina 2 models")
        device, dtype = x.device, self.dtype
        b, _, h, w = x.shape
        # Odd sizes: ComfyUI pads circularly to whole patches and crops the output back.
        x = F.pad(x, (0, (-w) % PATCH, 0, (-h) % PATCH), mode="circular").to(dtype)
        context = cond["context"].to(device, dtype)
        if context.shape[0] != b:
            context = context.expand(b, -1, -1)
        # Every caption token counts: ComfyUI passes no mask when the text encoder's mask is all ones (unpadded
        # Gemma tokens always are).
        mask = torch.ones(context.shape[:2], dtype=torch.bool, device=device)
        t = (1.0 - _per_batch(timestep, b)).to(device, dtype)  # the network's time runs from noise (0) to image (1)
        out = self.module(x, t, context, mask, return_dict=False)[0]
        return -out[:, :, :h, :w].float()


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> Lumina2DiffusionModel:
    """A Lumina 2 DiffusionModel from ComfyUI's single file or all-in-one checkpoint, LoRAs merged."""
    from nodes.models.safetensors_io import build_module

    path = ref.sources[0] if ref.sources else None
    prefix = find_lumina2_prefix(state_dict.keys())
    if prefix is None:
        raise ModelLoadError(path, "not a Lumina 2 transformer (no cap_embedder / layers.0.adaLN_modulation.1 keys)")
    comfy_sd = {k[len(prefix) :]: v for k, v in state_dict.items() if k.startswith(prefix)}
    if ref.patches:
        comfy_sd, _ = merge_loras(ref.patches, lora_targets(comfy_sd), comfy_sd)
    try:
        sd = to_diffusers_layout(comfy_sd)
        config, ffn = infer_config(sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Lumina 2 transformer: {e}") from None
    dtype = sd["x_embedder.weight"].dtype
    module = build_module(lambda: make_transformer(config, ffn, dtype), sd, path, "Lumina 2 transformer", dtype=dtype)
    # diffusers keeps the RoPE tables as plain tensors made at construction, which was on the meta device.
    module.rope_embedder = type(module.rope_embedder)(
        theta=10000, axes_dim=config["axes_dim_rope"], axes_lens=config["axes_lens"], patch_size=PATCH
    )
    return Lumina2DiffusionModel(
        arch="lumina2",
        module=module,
        latent_format=FLUX_LATENT,
        sampling=dict(sampling_config("lumina2")),
        config={**config, "ffn": ffn},
        dtype=dtype,
    )


# The loader (nodes.models.loader) finds every Lumina 2 entry point on this module.
from nodes.models.flux_vae import load_vae  # noqa: E402
from nodes.models.lumina2_text import load_text_encoder  # noqa: E402

__all__ = [
    "infer_config",
    "load_diffusion_model",
    "load_text_encoder",
    "load_vae",
    "lora_targets",
    "to_diffusers_layout",
]
