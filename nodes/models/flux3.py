"""FLUX 3 image diffusion models (black-forest-labs/flux-3-image-klein-comfy: diffusion_models/flux3-image-klein-*,
BFL's names `emb_in.{image,image_cond}`, `txt_in`, `time_in`, `{early,single}_stream_modulations.*.lin`,
`content_mode_blocks.{image,image_cond}.N`, `txt_mode_blocks.N`, `single_blocks.N`, `final_layer.image`, bare or
under `model.diffusion_model.`).

Detection and layout: diffusers 0.42's single-file support (CHECKPOINT_KEY_NAMES["flux3"] =
`early_stream_modulations.image.lin.weight`, bare or prefixed; `ref_time_in.` marks the step-distilled flow-map
model) and its convert_flux3_transformer_checkpoint_to_diffusers, which this module calls. The network is
diffusers' Flux3Transformer2DModel, its config read from the tensor shapes. The newest ComfyUI's FLUX 3 code was
not readable here (the code index holds no comfy/ldm/flux3 nor its model_detection branch), so `apply` drives the
module as diffusers' Flux3 modular pipeline does: ComfyUI's FLUX.2 latent ([B,128,H/16,W/16], the flux2-vae
the template loads, standardised by its batch-norm statistics) flattened to one token per latent pixel, rotary
ids (t, h/2, w/2, l) with l = 0 for the image and -(i+1) for the i-th reference, text ids (0, 0, 0, n), sigma as
the timestep; the step-distilled flow-map model (`ref_time_in`) also takes the next sigma of the sampler's
schedule (the denoise step passes it as `sample_sigmas`, ComfyUI's transformer option of that name), as diffusers'
Flux3DistilledLoopDenoiser passes the next timestep. Numbers are checked against diffusers
(tests/models/test_flux3.py), not against ComfyUI.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from diffusers import Flux3Transformer2DModel
from diffusers.loaders.single_file_utils import convert_flux3_transformer_checkpoint_to_diffusers

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models.components import DiffusionModel
from nodes.models.flux_keys import count_blocks, find_prefix, strip_prefix
from nodes.models.fp8 import dequantize_scaled_fp8
from nodes.models.lora import LoraTargets
from nodes.models.single_file import load_single_file_transformer

MARKER = "early_stream_modulations.image.lin.weight"
FLOW_MAP_MARKER = "ref_time_in.in_layer.weight"
# diffusers' Flux3PrepareLatentsStep: image rows and columns advance by half a rotary unit
IMAGE_ROPE_SCALE = 0.5


def bfl_layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """BFL's names, unprefixed, with ComfyUI's scaled-fp8 layers multiplied out."""
    prefix = find_prefix(state_dict.keys(), MARKER)
    if prefix is None:
        raise ValueError(f"not a FLUX 3 state dict (no {MARKER})")
    return strip_prefix(dequantize_scaled_fp8(state_dict), prefix)


def to_diffusers_layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' names from BFL's file, by diffusers' own single-file converter."""
    return convert_flux3_transformer_checkpoint_to_diffusers(bfl_layout(state_dict))


def lora_targets(bfl_sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    """The names a FLUX 3 LoRA may give a layer, for a state dict in BFL's (the file's, unprefixed) names: BFL's
    own (bare or under `diffusion_model.`, as ai-toolkit writes them; kohya's `lora_unet_` with underscores) and
    diffusers' (bare or under `transformer.`). The output adaLN has no diffusers alias: diffusers stores its rows
    swapped, so a delta in its order would land on the wrong half."""
    targets = LoraTargets(
        ("lora_unet_", "diffusion_model.", "transformer.") + tuple(sorted({k.split(".")[0] + "." for k in bfl_sd})), {}
    )
    for key, value in bfl_sd.items():
        if not key.endswith(".weight") or value.dim() != 2:
            continue
        name = key[: -len(".weight")]
        aliases = [name, "diffusion_model." + name, "lora_unet_" + name.replace(".", "_")]
        if not key.endswith("adaLN_modulation.1.weight"):
            (theirs,) = convert_flux3_transformer_checkpoint_to_diffusers({key: value})
            aliases += [theirs[: -len(".weight")], "transformer." + theirs[: -len(".weight")]]
        targets.add(key, *aliases)
    return targets


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Flux3Transformer2DModel's config from a diffusers-layout state dict's shapes. The rotary split, which no
    shape carries, keeps diffusers' four equal axes (32 each of the 128-wide heads)."""
    inner, in_channels = sd["x_embedders.image.weight"].shape
    head_dim = int(sd["mode_blocks.image.0.attn.norm_q.weight"].shape[0])
    if inner % head_dim or head_dim % 8:
        raise ValueError(f"model width {inner} and head width {head_dim} do not give four even rotary axes")
    mlp_hidden = int(sd["mode_blocks.image.0.ff.linear_out.weight"].shape[1])
    return {
        "in_channels": int(in_channels),
        "cond_in_channels": int(sd["x_embedders.image_cond.weight"].shape[1]),
        "num_layers": count_blocks(sd, "mode_blocks.image"),
        "num_single_layers": count_blocks(sd, "single_transformer_blocks"),
        "attention_head_dim": head_dim,
        "num_attention_heads": int(inner) // head_dim,
        "joint_attention_dim": int(sd["context_embedder.weight"].shape[1]),
        "timestep_channels": int(sd["timestep_embedder.linear_1.weight"].shape[1]),
        "mlp_ratio": mlp_hidden / int(inner),
        "axes_dims_rope": (head_dim // 4,) * 4,
        "flow_map": "target_timestep_embedder.linear_1.weight" in sd,
    }


def grid_ids(rows: int, cols: int, l_coord: float, device: torch.device) -> torch.Tensor:
    """[rows*cols, 4] rotary ids (t, h, w, l) of a latent grid, row-major, h and w at half a unit per cell."""
    h = torch.arange(rows, dtype=torch.float32).repeat_interleave(cols) * IMAGE_ROPE_SCALE
    w = torch.arange(cols, dtype=torch.float32).repeat(rows) * IMAGE_ROPE_SCALE
    t = torch.zeros(rows * cols)
    return torch.stack([t, h, w, torch.full_like(t, l_coord)], dim=1).to(device)


def text_ids(length: int, device: torch.device) -> torch.Tensor:
    """[length, 4] rotary ids of the text tokens: they advance along the l axis only."""
    ids = torch.zeros(length, 4)
    ids[:, 3] = torch.arange(length, dtype=torch.float32)
    return ids.to(device)


def _tokens(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(x.shape[0], x.shape[1], -1).transpose(1, 2)


def _per_batch(t: torch.Tensor | float, b: int, device: torch.device) -> torch.Tensor:
    t = torch.as_tensor(t, dtype=torch.float32, device=device).reshape(-1)
    return t.expand(b) if t.numel() == 1 else t


def target_sigma(sigma: torch.Tensor, schedule: torch.Tensor | None) -> torch.Tensor:
    """The sigma a flow-map (step-distilled) model's step jumps to: the one after `sigma` in the sampler's
    schedule (0 after the last), as diffusers' Flux3DistilledLoopDenoiser passes the next timestep."""
    if schedule is None:
        raise NotImplementedError(
            "the step-distilled FLUX 3 model (a flow map) needs the sampler's sigma schedule to know where each "
            "step jumps; this sampler does not give it (use KSampler or SamplerCustom)"
        )
    schedule = schedule.to(sigma.device, torch.float32).reshape(-1)
    out = []
    for s in sigma.tolist():
        i = int(torch.argmin((schedule - s).abs()))
        if abs(float(schedule[i]) - s) > 1e-4 * max(1.0, abs(s)):
            raise ValueError(f"sigma {s} is not on the sampler's schedule; the flow-map model cannot tell its target")
        out.append(float(schedule[i + 1]) if i + 1 < len(schedule) else 0.0)
    return torch.tensor(out, device=sigma.device)


@dataclass
class Flux3DiffusionModel(DiffusionModel):
    reads_schedule = True  # the step-distilled (flow-map) model's target sigmas

    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control") is not None:
            raise NotImplementedError("ControlNets are not supported for FLUX 3 models")
        module: Flux3Transformer2DModel = self.module
        device, dtype = x.device, self.dtype
        b, c, h, w = x.shape
        context = cond["context"].to(device, dtype)
        if context.shape[-1] != module.config.joint_attention_dim:
            raise ValueError(
                f"FLUX 3 takes text states {module.config.joint_attention_dim} wide; the conditioning is "
                f"{tuple(context.shape)} (encode the prompt with a CLIPLoader of type flux3)"
            )
        context = context.expand(b, -1, -1) if context.shape[0] == 1 else context
        extra: dict[str, torch.Tensor] = {}
        refs = cond.get("ref_latents") or []
        if refs:  # ReferenceLatent / ReferenceMultiLatent: each reference at its own l coordinate
            extra["image_cond_hidden_states"] = torch.cat([_tokens(r.to(device, dtype)) for r in refs], 1).expand(
                b, -1, -1
            )
            extra["image_cond_ids"] = torch.cat(
                [grid_ids(r.shape[-2], r.shape[-1], -(1.0 + i), device) for i, r in enumerate(refs)]
            )
        sigma = _per_batch(timestep, b, device)
        if module.config.flow_map:
            extra["target_timestep"] = target_sigma(sigma, cond.get("sample_sigmas")).to(dtype)
        out = module(
            hidden_states=_tokens(x.to(dtype)),
            encoder_hidden_states=context,
            timestep=sigma.to(dtype),
            img_ids=grid_ids(h, w, 0.0, device),
            txt_ids=text_ids(context.shape[1], device),
            return_dict=False,
            **extra,
        )[0]
        return out.transpose(1, 2).reshape(b, c, h, w).float()


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> Flux3DiffusionModel:
    """A FLUX 3 DiffusionModel from a bare or `model.diffusion_model.`-prefixed transformer file, LoRAs merged
    (LoraLoaderModelOnly). It computes in float32 whatever the file's dtype; scaled fp8 is multiplied out, other
    quantised layouts (the template's int8 ConvRot) are refused with their extra tensors named."""
    module, config = load_single_file_transformer(
        ref,
        state_dict,
        what="FLUX 3 transformer",
        layout=bfl_layout,
        lora_targets=lora_targets,
        convert=convert_flux3_transformer_checkpoint_to_diffusers,
        infer_config=infer_config,
        model_class=Flux3Transformer2DModel,
    )
    return Flux3DiffusionModel(
        arch="flux3",
        module=module,
        latent_format=latent_format("flux3"),
        sampling=dict(sampling_config("flux3")),
        config=config,
    )


# The loader (nodes.models.loader) finds every FLUX 3 entry point on this module; its VAE is FLUX.2's.
from nodes.models.flux3_text import load_text_encoder  # noqa: E402

__all__ = [
    "grid_ids",
    "infer_config",
    "load_diffusion_model",
    "load_text_encoder",
    "lora_targets",
    "target_sigma",
    "text_ids",
    "to_diffusers_layout",
]
