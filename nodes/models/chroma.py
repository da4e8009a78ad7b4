"""Chroma (lodestones' Chroma1-HD and its ComfyUI repackagings): Flux.1's double/single-stream transformer with the
per-block modulation layers pruned and one "distilled guidance" approximator MLP that computes every block's shift,
scale and gate from the timestep, a guidance value (0 unless FluxGuidance sets one) and a modulation index.

Detected as ComfyUI's model_detection does (a Flux layout with `distilled_guidance_layer.norms.0.scale`); the
network is diffusers' ChromaTransformer2DModel with its sizes read from the tensor shapes and its keys converted
here (diffusers' own single-file converter fixes the width at 3072). Two details follow ComfyUI's Chroma rather than
diffusers': the approximator always sees ComfyUI's 344 modulation indices (the final layer reads the last two,
whatever the block count) and the guidance embedding takes the conditioning's guidance value. Latents are Flux.1's
16-channel ones, packed in 2x2 patches; sampling is ModelSamplingFlux at shift 1.15 (ComfyUI's Flux model type).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from diffusers import ChromaTransformer2DModel
from diffusers.models.embeddings import get_timestep_embedding
from diffusers.models.transformers.transformer_chroma import ChromaCombinedTimestepTextProjEmbeddings

from cluster.refs import ModelRef
from nodes.models import comfy_quant
from nodes.models.components import FLUX_LATENT, DiffusionModel
from nodes.models.errors import ModelLoadError
from nodes.models.flux import REAL_FLUX_AXES, image_ids, pack, patched, per_batch, rope_image_ids, unpack
from nodes.models.flux_configs import config_for_sources
from nodes.models.flux_keys import count_blocks, find_prefix, strip_prefix
from nodes.models.fp8 import dequantize_scaled_fp8

MARKER = "distilled_guidance_layer.norms.0.scale"  # ComfyUI's model_detection test for Chroma (beside Flux's keys)
FLUX_BLOCK = "double_blocks.0.img_attn.norm.key_norm.scale"
MOD_INDICES = 344  # ComfyUI's Chroma.forward_orig: mod_index_length, fixed (Chroma1's 19 double + 38 single blocks)
EMBED = 16  # the timestep's and the guidance's sinusoidal widths (the modulation index takes 2 x 16)
SAMPLING = {"kind": "flux", "shift": 1.15}  # supported_models.Chroma: ModelType.FLUX, multiplier 1

# ComfyUI / lodestones names -> diffusers' ChromaTransformer2DModel names (per-block names relative to the block).
_GLOBAL = {
    "img_in": "x_embedder",
    "txt_in": "context_embedder",
    "final_layer.linear": "proj_out",
    "distilled_guidance_layer.in_proj": "distilled_guidance_layer.in_proj",
    "distilled_guidance_layer.out_proj": "distilled_guidance_layer.out_proj",
}
_DOUBLE = {
    "img_attn.proj": "attn.to_out.0",
    "txt_attn.proj": "attn.to_add_out",
    "img_mlp.0": "ff.net.0.proj",
    "img_mlp.2": "ff.net.2",
    "txt_mlp.0": "ff_context.net.0.proj",
    "txt_mlp.2": "ff_context.net.2",
}
_DOUBLE_NORMS = {
    "img_attn.norm.query_norm.scale": "attn.norm_q.weight",
    "img_attn.norm.key_norm.scale": "attn.norm_k.weight",
    "txt_attn.norm.query_norm.scale": "attn.norm_added_q.weight",
    "txt_attn.norm.key_norm.scale": "attn.norm_added_k.weight",
}
_QKV = {
    "img_attn.qkv": ("attn.to_q", "attn.to_k", "attn.to_v"),
    "txt_attn.qkv": ("attn.add_q_proj", "attn.add_k_proj", "attn.add_v_proj"),
}
_SINGLE_NORMS = {"norm.query_norm.scale": "attn.norm_q.weight", "norm.key_norm.scale": "attn.norm_k.weight"}
_LINEAR1 = ("attn.to_q", "attn.to_k", "attn.to_v", "proj_mlp")
_SCALES = ("weight_scale", "input_scale", "scale_weight", "scale_input")


def is_chroma_state_dict(keys: Iterable[str]) -> bool:
    keys = set(keys)
    p = find_prefix(keys, MARKER)
    return p is not None and p + FLUX_BLOCK in keys


def to_diffusers_layout(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A Chroma state dict in ComfyUI's layout (bare or under any prefix) in diffusers' layout; unknown keys are
    refused by name, so a Chroma variant with other layers is not half-loaded."""
    p = find_prefix(sd.keys(), MARKER)
    if p is None:
        raise ValueError(f"not a Chroma transformer (no {MARKER})")
    sd = strip_prefix(sd, p)
    hidden = sd["txt_in.weight"].shape[0]
    out: dict[str, torch.Tensor] = {}
    used: set[str] = set()

    def move(src: str, dst: str) -> None:
        for end in ("weight", "bias"):
            if f"{src}.{end}" in sd:
                used.add(f"{src}.{end}")
                out[f"{dst}.{end}"] = sd[f"{src}.{end}"]

    for src, dst in _GLOBAL.items():
        move(src, dst)
    for i in range(count_blocks(sd, "distilled_guidance_layer.layers")):
        src, dst = f"distilled_guidance_layer.layers.{i}.", f"distilled_guidance_layer.layers.{i}."
        move(src + "in_layer", dst + "linear_1")
        move(src + "out_layer", dst + "linear_2")
        used.add(f"distilled_guidance_layer.norms.{i}.scale")
        out[f"distilled_guidance_layer.norms.{i}.weight"] = sd[f"distilled_guidance_layer.norms.{i}.scale"]
    for i in range(count_blocks(sd, "double_blocks")):
        src, dst = f"double_blocks.{i}.", f"transformer_blocks.{i}."
        for b, d in _DOUBLE.items():
            move(src + b, dst + d)
        for b, d in _DOUBLE_NORMS.items():
            used.add(src + b)
            out[dst + d] = sd[src + b]
        for b, parts in _QKV.items():
            for end in ("weight", "bias"):
                used.add(f"{src}{b}.{end}")
                for d, t in zip(parts, sd[f"{src}{b}.{end}"].split(hidden, dim=0)):
                    out[f"{dst}{d}.{end}"] = t
    for i in range(count_blocks(sd, "single_blocks")):
        src, dst = f"single_blocks.{i}.", f"single_transformer_blocks.{i}."
        move(src + "linear2", dst + "proj_out")
        for b, d in _SINGLE_NORMS.items():
            used.add(src + b)
            out[dst + d] = sd[src + b]
        for end in ("weight", "bias"):
            used.add(f"{src}linear1.{end}")
            w = sd[f"{src}linear1.{end}"]
            for d, t in zip(_LINEAR1, w.split([hidden, hidden, hidden, w.shape[0] - 3 * hidden], dim=0)):
                out[f"{dst}{d}.{end}"] = t
    unknown = sorted(set(sd) - used)
    if unknown:
        raise ValueError(f"unsupported Chroma weights: {unknown[:8]}")
    return {k: v.contiguous() for k, v in out.items()}


def infer_config(sd: Mapping[str, torch.Tensor], axes_dim: Iterable[int] | None = None) -> dict[str, Any]:
    """ChromaTransformer2DModel's config from a diffusers-layout state dict's shapes (ComfyUI's detection fixes
    them at Chroma1's; reading them lets a narrower file load too)."""
    inner, in_channels = sd["x_embedder.weight"].shape
    n_double = count_blocks(sd, "transformer_blocks")
    n_single = count_blocks(sd, "single_transformer_blocks")
    block = "transformer_blocks.0" if n_double else "single_transformer_blocks.0"
    head_dim = int(sd[f"{block}.attn.norm_k.weight"].shape[0])
    if inner % head_dim:
        raise ValueError(f"Chroma hidden size {inner} is not a multiple of the head dim {head_dim}")
    approx_hidden, approx_in = sd["distilled_guidance_layer.in_proj.weight"].shape
    if approx_in != 4 * EMBED:
        raise ValueError(f"the approximator takes {approx_in} inputs; Chroma's are {4 * EMBED}")
    if sd["distilled_guidance_layer.out_proj.weight"].shape[0] != inner:
        raise ValueError("the approximator's output width is not the transformer's")
    if 3 * n_single + 12 * n_double + 2 > MOD_INDICES:
        raise ValueError(f"{n_double} double and {n_single} single blocks need more than {MOD_INDICES} modulations")
    if axes_dim is None:
        if head_dim != sum(REAL_FLUX_AXES):
            raise ValueError(
                f"cannot infer the RoPE axes of a Chroma with head dim {head_dim}: the file needs a config "
                "(safetensors metadata 'comfy_cluster.config' naming a folder with flux.json)"
            )
        axes_dim = REAL_FLUX_AXES
    axes_dim = tuple(int(a) for a in axes_dim)
    if sum(axes_dim) != head_dim:
        raise ValueError(f"RoPE axes {axes_dim} do not sum to the head dim {head_dim}")
    return {
        "patch_size": 1,  # the 2x2 patching happens outside the module, as for Flux
        "in_channels": int(in_channels),
        "out_channels": int(sd["proj_out.weight"].shape[0]) if "proj_out.weight" in sd else int(in_channels),
        "num_layers": n_double,
        "num_single_layers": n_single,
        "attention_head_dim": head_dim,
        "num_attention_heads": int(inner // head_dim),
        "joint_attention_dim": int(sd["context_embedder.weight"].shape[1]),
        "axes_dims_rope": axes_dim,
        "approximator_num_channels": int(approx_in),
        "approximator_hidden_dim": int(approx_hidden),
        "approximator_layers": count_blocks(sd, "distilled_guidance_layer.layers"),
    }


call_guidance = threading.local()


class ComfyModulationInput(ChromaCombinedTimestepTextProjEmbeddings):
    """diffusers' approximator input with ComfyUI's 344 modulation indices and the guidance value of this
    thread's call (diffusers always embeds 0; ComfyUI embeds the conditioning's guidance, 0 by default)."""

    def __init__(self, num_channels: int, out_dim: int) -> None:
        super().__init__(num_channels, out_dim)
        # Built on the CPU even inside build_module's meta-device construction: no file holds this buffer.
        index = torch.arange(out_dim, device="cpu") * 1000
        table = get_timestep_embedding(index, 2 * num_channels, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.register_buffer("mod_proj", table, persistent=False)

    def forward(self, timestep: torch.Tensor) -> torch.Tensor:
        vec = super().forward(timestep)
        guidance = getattr(call_guidance, "value", None)
        if guidance is None:
            return vec
        emb = self.guidance_proj(guidance.to(timestep.device) * 1000).to(vec.dtype)
        vec = vec.clone()
        vec[:, :, EMBED : 2 * EMBED] = emb[:, None, :]
        return vec


@dataclass
class ChromaDiffusionModel(DiffusionModel):
    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control") is not None:
            raise NotImplementedError("ControlNet is not supported for Chroma models yet")
        if cond.get("ref_latents"):
            raise NotImplementedError("reference latents (ReferenceLatent) are not supported for Chroma models")
        if cond.get("guidance_disabled"):
            raise ValueError("Chroma embeds a guidance value; FluxDisableGuidance leaves it none (ComfyUI fails too)")
        module: ChromaTransformer2DModel = self.module
        device, dtype = x.device, self.dtype
        b, _, h, w = x.shape
        x = patched(x)
        h_len, w_len = x.shape[-2] // 2, x.shape[-1] // 2
        ids = image_ids(h_len, w_len, dtype, device)
        if cond.get("rope_options"):  # ScaleROPE
            ids = rope_image_ids(h_len, w_len, cond["rope_options"], 3, device).to(dtype)
        context = cond["context"].to(device, dtype)
        call_guidance.value = per_batch(cond.get("guidance") or 0.0, b, device)
        try:
            out = module(
                hidden_states=pack(x.to(dtype)),
                encoder_hidden_states=context,
                timestep=per_batch(timestep, b, device),  # sigma: ComfyUI's Flux time unit (multiplier 1)
                img_ids=ids,
                txt_ids=torch.zeros(context.shape[1], 3, dtype=dtype, device=device),
                return_dict=False,
            )[0]
        finally:
            call_guidance.value = None
        return unpack(out, h_len, w_len)[:, :, :h, :w].float()


def build_chroma(config: Mapping[str, Any]) -> ChromaTransformer2DModel:
    """The network of `config` with ComfyUI's modulation input (344 indices, the guidance value)."""
    module = ChromaTransformer2DModel(**config)
    module.time_text_embed = ComfyModulationInput(
        num_channels=config["approximator_num_channels"] // 4, out_dim=MOD_INDICES
    )
    for norm in module.distilled_guidance_layer.norms:
        norm.eps = 1e-6  # ComfyUI's RMSNorm; torch's default is the dtype's machine epsilon
    return module


def float_weights(state_dict: Mapping[str, torch.Tensor], path: str | None) -> dict[str, torch.Tensor]:
    """A Chroma file's weights as floats: ComfyUI's fp8mixed layers (Chroma1-HD-fp8mixed: comfy_quant float8 with a
    weight_scale) and scaled-fp8 layers (scale_weight) multiplied out, in the dtype of the file's unquantized
    layers; a plain fp8 file computes in bfloat16."""
    floats = [
        t.dtype
        for k, t in state_dict.items()
        if t.is_floating_point() and t.element_size() > 1 and not k.endswith(_SCALES)  # scales are float32
    ]
    compute = floats[0] if floats else torch.bfloat16
    sd = comfy_quant.dequantize(state_dict, path, compute) if comfy_quant.is_quantized(state_dict) else state_dict
    sd = dequantize_scaled_fp8(sd)
    return {k: v.to(compute) if v.is_floating_point() and v.element_size() == 1 else v for k, v in sd.items()}


def load_diffusion_model(
    ref: ModelRef, state_dict: Mapping[str, torch.Tensor], axes_dim: Iterable[int] | None = None
) -> ChromaDiffusionModel:
    """A Chroma DiffusionModel from a state dict in ComfyUI's layout. RoPE axes: `axes_dim`, else the config
    folder the file's metadata names, else Flux.1's."""
    from nodes.models.safetensors_io import build_module

    path = ref.sources[0] if ref.sources else None
    try:
        sd = to_diffusers_layout(float_weights(state_dict, path))
        if axes_dim is None:
            axes_dim = config_for_sources(ref.sources)[1].get("axes_dim")
        config = infer_config(sd, axes_dim)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Chroma transformer: {e}") from None
    dtype = sd["x_embedder.weight"].dtype
    module = build_module(lambda: build_chroma(config), sd, path, "Chroma transformer", dtype=dtype)
    return ChromaDiffusionModel(
        arch="chroma", module=module, latent_format=FLUX_LATENT, sampling=dict(SAMPLING), config=config, dtype=dtype
    )


# The loader (nodes.models.loader) finds Chroma's entry points on this module.
from nodes.models.chroma_text import load_text_encoder  # noqa: E402

__all__ = ["is_chroma_state_dict", "load_diffusion_model", "load_text_encoder"]
