"""Z-Image (Turbo) diffusion models from ComfyUI's repackaged single file (diffusion_models/
z_image_turbo_bf16.safetensors: ComfyUI's NextDiT names `x_embedder`, `layers.N.attention.qkv`, ...,
bare or under `model.diffusion_model.`).

The network is diffusers' ZImageTransformer2DModel; diffusers' own single-file conversion renames the keys,
the sizes come from the shapes. `apply` takes ComfyUI's view of the model: a [B,16,H,W] latent (Flux's latent
format), sigma as the timestep (ModelSamplingAuraFlow, multiplier 1), the Qwen3 hidden states as context; the
network sees 1 - sigma and ComfyUI's NextDiT returns the negated output, so `apply` does too."""

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
from nodes.models.lora import LoraTargets, WeightSlice, merge_loras
from nodes.models.safetensors_io import build_module

MARKER = "layers.0.adaLN_modulation.0.weight"  # Z-Image's modulation: a bare Linear (Lumina 2 has SiLU first)
EMBED_MARKER = "cap_embedder.1.weight"
PATCH = 2
REAL_AXES = {128: (32, 48, 48)}  # head dim -> RoPE axes (Z-Image's; ComfyUI hard-codes them for dim 3840)
# Position tables long enough for any prompt and image; the rotation of a position does not depend on it.
AXES_LENS = (8192, 4096, 4096)
ROPE_THETA, TIME_SCALE, NORM_EPS = 256.0, 1000.0, 1e-5


def find_zimage_prefix(keys) -> str | None:
    keys = list(keys)
    p = find_prefix(keys, MARKER)
    return p if p is not None and f"{p}{EMBED_MARKER}" in keys else None


def to_diffusers_layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """ComfyUI's NextDiT names -> diffusers' (diffusers' single-file conversion: fused qkv split, renames)."""
    from diffusers.loaders.single_file_utils import convert_z_image_transformer_checkpoint_to_diffusers

    prefix = find_zimage_prefix(state_dict.keys())
    if prefix is None:
        raise ValueError("not a Z-Image transformer (no cap_embedder / layers.0.adaLN_modulation.0 keys)")
    # The conversion pops what it converts: hand it a new dict of the transformer's tensors only.
    sd = {k[len(prefix) :]: v for k, v in state_dict.items() if k.startswith(prefix)}
    return convert_z_image_transformer_checkpoint_to_diffusers(sd)


# diffusers' names of a block's layers -> ComfyUI's (the newest ComfyUI's comfy/utils.py z_image_to_diffusers; to_q,
# to_k and to_v are rows of the fused qkv, handled apart).
_DIFFUSERS_BLOCK_NAMES = {
    "attention.norm_q": "attention.q_norm",
    "attention.norm_k": "attention.k_norm",
    "attention.to_out.0": "attention.out",
    **{n: n for n in ("attention_norm1", "attention_norm2", "ffn_norm1", "ffn_norm2", "adaLN_modulation.0")},
    **{f"feed_forward.w{i}": f"feed_forward.w{i}" for i in (1, 2, 3)},
}
_DIFFUSERS_TOP_NAMES = {
    "all_final_layer.2-1.linear": "final_layer.linear",
    "all_final_layer.2-1.adaLN_modulation.1": "final_layer.adaLN_modulation.1",
    "all_x_embedder.2-1": "x_embedder",
    **{n: n for n in ("cap_embedder.0", "cap_embedder.1", "t_embedder.mlp.0", "t_embedder.mlp.2")},
}


def _diffusers_names(sd: Mapping[str, torch.Tensor]) -> dict[str, str | WeightSlice]:
    """diffusers' layer names -> the weight (or, for to_q / to_k / to_v, the rows of the fused qkv at the model's
    width, as ComfyUI slices them) in ComfyUI's names."""
    dim = sd["x_embedder.weight"].shape[0]
    out: dict[str, str | WeightSlice] = {
        d: f"{c}.weight" for d, c in _DIFFUSERS_TOP_NAMES.items() if f"{c}.weight" in sd
    }
    blocks = {".".join(k.split(".")[:2]) for k in sd if k.startswith(("layers.", "noise_refiner.", "context_refiner."))}
    for block in sorted(blocks):
        qkv = f"{block}.attention.qkv.weight"
        if qkv in sd:
            for i, part in enumerate(("to_q", "to_k", "to_v")):
                out[f"{block}.attention.{part}"] = WeightSlice(qkv, 0, i * dim, dim)
        for d, c in _DIFFUSERS_BLOCK_NAMES.items():
            if f"{block}.{c}.weight" in sd:
                out[f"{block}.{d}"] = f"{block}.{c}.weight"
    return out


def lora_targets(sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    """The names the newest ComfyUI gives a Z-Image LoRA's layers (comfy/lora.py's model_lora_keys_unet for its
    Lumina2 model class), for a state dict in ComfyUI's unprefixed NextDiT names: ComfyUI's own names under
    `diffusion_model.` or kohya's `lora_unet_` with underscores (ComfyUI's saved LoRAs), and diffusers' names
    (ai-toolkit's `diffusion_model.layers.N.attention.to_q`, diffusers' `transformer.`, SimpleTuner's `lycoris_`,
    bare) where to_q / to_k / to_v are their rows of the fused qkv."""
    tops = tuple(sorted({k.split(".")[0] + "." for k in sd}))
    targets = LoraTargets(("lora_unet_", "diffusion_model.", "transformer.", "lycoris_", "all_") + tops, {})
    for key in sd:
        if key.endswith(".weight"):
            name = key[: -len(".weight")]
            targets.add(key, "diffusion_model." + name, "lora_unet_" + name.replace(".", "_"))
    for d, target in _diffusers_names(sd).items():
        targets.add(target, "diffusion_model." + d, "transformer." + d, "lycoris_" + d.replace(".", "_"), d)
    return targets


def count_blocks(sd: Mapping[str, torch.Tensor], name: str) -> int:
    return len({k.split(".")[1] for k in sd if k.startswith(name + ".")})


def infer_config(
    sd: Mapping[str, torch.Tensor], axes_dims: tuple[int, ...] | None = None
) -> tuple[dict[str, Any], dict[str, int]]:
    """ZImageTransformer2DModel's config, plus the two widths it does not take as arguments (the timestep
    MLP's and the feed-forward's; ComfyUI derives them differently from diffusers for narrow models)."""
    dim, patch_in = sd["all_x_embedder.2-1.weight"].shape
    head_dim = sd["layers.0.attention.norm_q.weight"].shape[0]
    if dim % head_dim:
        raise ValueError(f"width {dim} is not a multiple of the head dim {head_dim}")
    if sd["layers.0.attention.to_k.weight"].shape[0] != dim:
        raise ValueError("grouped-query attention (fewer kv heads) is not supported by diffusers' Z-Image")
    refiners = count_blocks(sd, "noise_refiner")
    if count_blocks(sd, "context_refiner") != refiners:
        raise ValueError("the noise and context refiners have different depths")
    axes = tuple(axes_dims) if axes_dims is not None else REAL_AXES.get(int(head_dim))
    if axes is None or sum(axes) != head_dim:
        raise ValueError(f"no RoPE axes known for head dim {head_dim}")
    return {
        "all_patch_size": (PATCH,),
        "all_f_patch_size": (1,),
        "in_channels": int(patch_in // (PATCH * PATCH)),
        "dim": int(dim),
        "n_layers": count_blocks(sd, "layers"),
        "n_refiner_layers": refiners,
        "n_heads": int(dim // head_dim),
        "n_kv_heads": int(dim // head_dim),
        "norm_eps": NORM_EPS,
        "qk_norm": True,
        "cap_feat_dim": int(sd["cap_embedder.1.weight"].shape[1]),
        "rope_theta": ROPE_THETA,
        "t_scale": TIME_SCALE,
        "axes_dims": list(axes),
        "axes_lens": list(AXES_LENS),
    }, {
        "t_mid": int(sd["t_embedder.mlp.0.weight"].shape[0]),
        "ffn": int(sd["layers.0.feed_forward.w1.weight"].shape[0]),
    }


def make_transformer(config: dict[str, Any], widths: dict[str, int]):
    """diffusers' ZImageTransformer2DModel, its timestep MLP and feed-forwards resized to the file's widths
    where they differ from diffusers' fixed rule (1024 and int(dim / 3 * 8): the real model's)."""
    from diffusers import ZImageTransformer2DModel
    from diffusers.models.transformers.transformer_z_image import FeedForward, TimestepEmbedder

    model = ZImageTransformer2DModel(**config)
    dim = config["dim"]
    if model.t_embedder.mlp[0].out_features != widths["t_mid"]:
        model.t_embedder = TimestepEmbedder(min(dim, 256), mid_size=widths["t_mid"])
    for block in [*model.noise_refiner, *model.context_refiner, *model.layers]:
        if block.feed_forward.w1.out_features != widths["ffn"]:
            block.feed_forward = FeedForward(dim=dim, hidden_dim=widths["ffn"])
    return model


def _per_batch(v: torch.Tensor, batch: int) -> torch.Tensor:
    t = torch.as_tensor(v, dtype=torch.float32).reshape(-1)
    return t.expand(batch) if t.numel() == 1 else t


@dataclass
class ZImageDiffusionModel(DiffusionModel):
    def __post_init__(self) -> None:
        super().__post_init__()
        # diffusers embeds the patches and caption tokens of the whole batch as one 2-D [tokens, features]
        # input, which the batch-invariant Linear would multiply a token at a time (thousands of calls a step).
        # These are token-wise projections with many rows, whose results do not depend on the batch (tested).
        for linear in (self.module.all_x_embedder[f"{PATCH}-1"], self.module.cap_embedder[1]):
            linear.__class__ = torch.nn.Linear

    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control") is not None:
            raise NotImplementedError("ControlNet is not supported for Z-Image models yet")
        device, dtype = x.device, self.dtype
        b, _, h, w = x.shape
        # Odd sizes: ComfyUI pads circularly to whole patches and crops the output back.
        x = F.pad(x, (0, (-w) % PATCH, 0, (-h) % PATCH), mode="circular").to(dtype)
        context = cond["context"].to(device, dtype)
        t = 1.0 - _per_batch(timestep, b).to(device)  # the network's time runs from noise (0) to image (1)
        out = self.module(x=[xi.unsqueeze(1) for xi in x], t=t, cap_feats=list(context), return_dict=False)[0]
        return -torch.stack([o[:, 0] for o in out])[:, :, :h, :w].float()


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> ZImageDiffusionModel:
    """A Z-Image DiffusionModel from ComfyUI's single file (bare or `model.diffusion_model.`-prefixed)."""
    path = ref.sources[0] if ref.sources else None
    if ref.patches:  # merged in ComfyUI's names, the fused qkv before diffusers' conversion splits it
        prefix = find_zimage_prefix(state_dict.keys())
        if prefix is None:
            raise ModelLoadError(path, "not a Z-Image transformer (no cap_embedder / layers.0.adaLN_modulation.0 keys)")
        comfy_sd = {k[len(prefix) :]: v for k, v in state_dict.items() if k.startswith(prefix)}
        state_dict, _ = merge_loras(ref.patches, lora_targets(comfy_sd), comfy_sd)
    try:
        sd = to_diffusers_layout(state_dict)
        config, widths = infer_config(sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Z-Image transformer: {e}") from None
    dtype = sd["all_x_embedder.2-1.weight"].dtype
    module = build_module(lambda: make_transformer(config, widths), sd, path, "Z-Image transformer", dtype=dtype)
    return ZImageDiffusionModel(
        arch="zimage",
        module=module,
        latent_format=FLUX_LATENT,
        sampling=dict(sampling_config("zimage")),
        config={**config, **widths},
        dtype=dtype,
    )


# The loader (nodes.models.loader) finds every Z-Image entry point on this module.
from nodes.models.flux_vae import load_vae  # noqa: E402
from nodes.models.zimage_text import load_text_encoder  # noqa: E402

__all__ = [
    "infer_config",
    "load_diffusion_model",
    "load_text_encoder",
    "load_vae",
    "lora_targets",
    "to_diffusers_layout",
]
