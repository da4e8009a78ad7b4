"""CogVideoX's transformer (CogVideoX 1.0 / 1.5 and the CogVideoX-Fun V1.5 inpainting models VOID is trained from:
diffusion_models/void_pass1.safetensors, void_pass2.safetensors).

The file layout is ComfyUI's own (comfy/ldm/cogvideo/model.py of the newest ComfyUI, comfyanonymous/ComfyUI 349c5aa265;
the Comfy-Org/void-model files are written in it): `blocks.N.{q,k,v,norm_q,norm_k,attn_out,ff_proj,ff_out,norm1,
norm2}`, `patch_embed.{proj,text_proj,pos_embedding}`, `time_embedding_linear_{1,2}`, `ofs_embedding_linear_{1,2}`,
`norm_final`, `norm_out`, `proj_out`. Detection and sizes follow its model_detection rule (`blocks.0.norm1.linear`:
width = rows / 6, heads of 64, the time width its columns; a 2-D `patch_embed.proj` is 1.5's linear patcher with
2x2x2 patches, so in-channels = columns / 8: VOID's 48, its 16 latent channels and VOIDInpaintConditioning's 32);
rotary positions unless the file has a learned `pos_embedding`.

The network is diffusers' CogVideoXTransformer3DModel, which computes what ComfyUI's module computes; the keys are
renamed at load (`to_diffusers`). What ComfyUI does around it and diffusers leaves to its pipeline is done here:
circular padding to whole patches, the 3-D rotary table (ComfyUI's: time a quarter of the head, height and width
three eighths each, integer positions for 1.5, positions times the spatial interpolation scale for 1.0), the
[B,C,T,H,W] <-> [B,T,C,H,W] order, the offset embedding's default of 2 (ComfyUI's model_base.CogVideoX).

Sampling (ComfyUI's supported_models.CogVideoX_T2V): v-prediction on the unscaled input (its V_PREDICTION_DDPM) over
the linear betas 0.00085..0.012 rescaled to zero terminal SNR; the latent scale 0.7 for the 5B-class models (48 heads
or more: CogVideoX-5b, 1.5-5B and the Fun V1.5 / VOID models), 1.15258426 below. Inpainting channels
(concat_latent_image, VOIDInpaintConditioning's 32) join the input as ComfyUI's CogVideoX.concat_cond joins them:
each 16-channel part in model space, resized to the latent, cut or padded in time, cut or repeated to fit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from cluster.refs import ModelRef
from nodes.arch import sampling_config
from nodes.models.components import DiffusionModel, LatentFormat
from nodes.models.flux_keys import count_blocks, find_prefix, strip_prefix
from nodes.models.lora import LoraTargets
from nodes.models.single_file import load_single_file_transformer
from nodes.models.unet import resize_to_batch_size
from nodes.upscale import common_upscale

MARKER = "blocks.0.norm1.linear.weight"
TEXT_MARKER = "patch_embed.text_proj.weight"
HEAD_DIM = 64  # ComfyUI's detection fixes it
# ComfyUI's latent_formats.CogVideoX (2B) and CogVideoX1_5 (5B class, VOID's): picked by the head count
LATENT_2B = LatentFormat(16, 1.15258426)
LATENT_5B = LatentFormat(16, 0.7)
# CogVideoX 1.5's training size in pixels-of-latent (ComfyUI's get_model defaults for patch_size_t models)
SAMPLE_1_5 = {"sample_height": 96, "sample_width": 170, "sample_frames": 81}
OFS_DEFAULT = 2.0

_BLOCK_NAMES = {
    "q": "attn1.to_q",
    "k": "attn1.to_k",
    "v": "attn1.to_v",
    "norm_q": "attn1.norm_q",
    "norm_k": "attn1.norm_k",
    "attn_out": "attn1.to_out.0",
    "ff_proj": "ff.net.0.proj",
    "ff_out": "ff.net.2",
}
_TOP_NAMES = {
    "time_embedding_linear_1": "time_embedding.linear_1",
    "time_embedding_linear_2": "time_embedding.linear_2",
    "ofs_embedding_linear_1": "ofs_embedding.linear_1",
    "ofs_embedding_linear_2": "ofs_embedding.linear_2",
}
_BLOCK = re.compile(r"blocks\.(\d+)\.(\w+?)\.(.*)")


def to_diffusers(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """ComfyUI's CogVideoX names (unprefixed) -> diffusers' CogVideoXTransformer3DModel names."""
    out = {}
    for key, value in sd.items():
        m = _BLOCK.fullmatch(key)
        if m:
            index, part, rest = m.groups()
            key = f"transformer_blocks.{index}.{_BLOCK_NAMES.get(part, part)}.{rest}"
        else:
            head, _, rest = key.partition(".")
            key = f"{_TOP_NAMES[head]}.{rest}" if head in _TOP_NAMES else key
        out[key] = value
    return out


def layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The file's tensors in ComfyUI's names, unprefixed (bare or under `model.diffusion_model.`)."""
    prefix = find_prefix(state_dict.keys(), MARKER)
    if prefix is None or prefix + TEXT_MARKER not in state_dict:
        raise ValueError(f"not a CogVideoX state dict (no {MARKER} / {TEXT_MARKER})")
    return strip_prefix(state_dict, prefix)


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """diffusers' config from the tensors (diffusers' names), as ComfyUI's model_detection reads them."""
    norm1 = sd["transformer_blocks.0.norm1.linear.weight"]
    dim = norm1.shape[0] // 6
    proj = sd["patch_embed.proj.weight"]
    config: dict[str, Any] = {
        "num_attention_heads": dim // HEAD_DIM,
        "attention_head_dim": HEAD_DIM,
        "time_embed_dim": norm1.shape[1],
        "num_layers": count_blocks(sd.keys(), "transformer_blocks"),
        "text_embed_dim": sd["patch_embed.text_proj.weight"].shape[1],
        "patch_bias": "patch_embed.proj.bias" in sd,
    }
    if proj.dim() == 4:  # CogVideoX 1.0: a 2-D conv patcher
        config.update(in_channels=proj.shape[1], patch_size=proj.shape[2])
    else:  # 1.5: a linear patcher over 2x2x2 patches
        config.update(in_channels=proj.shape[1] // 8, patch_size=2, patch_size_t=2, **SAMPLE_1_5)
    config["out_channels"] = sd["proj_out.weight"].shape[0] // (
        config["patch_size"] ** 2 * config.get("patch_size_t", 1)
    )
    if "ofs_embedding.linear_1.weight" in sd:
        config["ofs_embed_dim"] = sd["ofs_embedding.linear_1.weight"].shape[1]
    learned = "patch_embed.pos_embedding" in sd
    config.update(use_learned_positional_embeddings=learned, use_rotary_positional_embeddings=not learned)
    return config


def rotary_1d(dim: int, positions: torch.Tensor, theta: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos / sin [N, dim], each frequency twice in a row (the pairs rotate as (real, imaginary))."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    angles = torch.outer(positions.float(), freqs)
    return angles.cos().repeat_interleave(2, dim=-1), angles.sin().repeat_interleave(2, dim=-1)


def rotary_table(config: Mapping[str, Any], t: int, h: int, w: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The image tokens' rotary cos / sin [t*h*w, head_dim] on a t x h x w patch grid (ComfyUI's table)."""
    d = config["attention_head_dim"]
    if config.get("patch_size_t") is not None:  # 1.5: integer positions
        rows, cols = torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32)
    else:  # 1.0: positions scaled by the spatial interpolation scale
        scale = config.get("spatial_interpolation_scale", 1.875)
        rows = torch.linspace(0, h - 1, h, dtype=torch.float32) * scale
        cols = torch.linspace(0, w - 1, w, dtype=torch.float32) * scale
    parts = (
        (rotary_1d(d // 4, torch.arange(t, dtype=torch.float32)), (t, 1, 1)),
        (rotary_1d(d // 8 * 3, rows), (1, h, 1)),
        (rotary_1d(d // 8 * 3, cols), (1, 1, w)),
    )

    def grid(table: torch.Tensor, shape: tuple[int, int, int]) -> torch.Tensor:
        return table.reshape(*shape, -1).expand(t, h, w, -1)

    cos = torch.cat([grid(c, shape) for (c, _), shape in parts], dim=-1).reshape(t * h * w, -1)
    sin = torch.cat([grid(s, shape) for (_, s), shape in parts], dim=-1).reshape(t * h * w, -1)
    return cos, sin


def lora_targets(sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    targets = LoraTargets(("diffusion_model.", "lora_unet_"), {})
    for key, value in sd.items():
        if key.endswith(".weight") and value.dim() == 2:
            name = key[: -len(".weight")]
            targets.add(key, name, "diffusion_model." + name, "lora_unet_" + name.replace(".", "_"))
    return targets


@dataclass
class CogVideoXDiffusionModel(DiffusionModel):
    def concat_image(
        self, image: torch.Tensor | None, x: torch.Tensor, mask: torch.Tensor | None = None, mask_index: int = 0
    ) -> torch.Tensor | None:
        """The extra input channels (ComfyUI's CogVideoX.concat_cond): zeros without an image; else each
        16-channel part of the image latent in model space, bilinearly resized (centre crop) to the latent,
        cut or zero-padded in frames, then cut or repeated to the model's extra channels."""
        extra = self.module.config.in_channels - x.shape[1]
        if extra <= 0:
            return None
        if image is None:
            return torch.zeros(x.shape[0], extra, *x.shape[2:], dtype=x.dtype, device=x.device)
        image = image.to(x.device, x.dtype)
        if image.shape[-2:] != x.shape[-2:]:
            image = common_upscale(image, x.shape[-1], x.shape[-2], "bilinear", "center")
        if image.shape[2] < x.shape[2]:
            image = F.pad(image, (0, 0, 0, 0, 0, x.shape[2] - image.shape[2]))
        image = image[:, :, : x.shape[2]]
        ch = self.latent_format.channels
        image = torch.cat(
            [self.latent_format.process_in(image[:, i : i + ch]) for i in range(0, image.shape[1], ch)], 1
        )
        image = resize_to_batch_size(image, x.shape[0])
        if image.shape[1] >= extra:
            return image[:, :extra]
        reps, rest = divmod(extra, image.shape[1])
        return torch.cat([image] * reps + ([image[:, :rest]] if rest else []), dim=1)

    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        for key, what in (("control", "ControlNets"), ("ref_latents", "reference latents (ReferenceLatent)")):
            if cond.get(key):
                raise NotImplementedError(f"{what} are not supported for CogVideoX models")
        if x.dim() != 5:
            raise ValueError(f"CogVideoX takes [B,C,T,H,W] latents; this one is {tuple(x.shape)}")
        module, config = self.module, self.config
        inp = x if cond.get("concat") is None else torch.cat([x, cond["concat"].to(x)], dim=1)
        if inp.shape[1] != config["in_channels"]:
            raise ValueError(
                f"this CogVideoX model takes {config['in_channels']} input channels (latent and inpainting "
                f"channels), got {inp.shape[1]}"
            )
        b, _, t, h, w = inp.shape
        p, pt = config["patch_size"], config.get("patch_size_t") or 1
        pad = (0, (p - w % p) % p, 0, (p - h % p) % p, 0, (pt - t % pt) % pt)
        inp = F.pad(inp, pad, mode="circular") if any(pad) else inp
        frames, height, width = inp.shape[2:]
        context = cond["context"].to(x.device, self.dtype)
        context = resize_to_batch_size(context, b)
        steps = torch.as_tensor(timestep, dtype=torch.float32, device=x.device).reshape(-1)
        steps = steps.expand(b) if steps.numel() == 1 else steps
        rotary = None
        if config["use_rotary_positional_embeddings"]:
            rotary = rotary_table(config, frames // pt, height // p, width // p)
            rotary = (rotary[0].to(x.device), rotary[1].to(x.device))
        ofs = None
        if config.get("ofs_embed_dim"):
            ofs = torch.full((b,), OFS_DEFAULT, device=x.device, dtype=torch.float32)
        out = module(
            hidden_states=inp.permute(0, 2, 1, 3, 4).to(self.dtype),
            encoder_hidden_states=context,
            timestep=steps,
            ofs=ofs,
            image_rotary_emb=rotary,
            return_dict=False,
        )[0]
        return out.permute(0, 2, 1, 3, 4)[:, :, :t, :h, :w].float()


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> CogVideoXDiffusionModel:
    """A CogVideoX DiffusionModel from ComfyUI's file layout, on diffusers' CogVideoXTransformer3DModel."""
    from diffusers import CogVideoXTransformer3DModel

    module, config = load_single_file_transformer(
        ref,
        state_dict,
        what="CogVideoX transformer",
        layout=layout,
        lora_targets=lora_targets,
        convert=to_diffusers,
        infer_config=infer_config,
        model_class=CogVideoXTransformer3DModel,
    )
    return CogVideoXDiffusionModel(
        arch="cogvideox",
        module=module,
        latent_format=LATENT_5B if config["num_attention_heads"] >= 48 else LATENT_2B,
        sampling=dict(sampling_config("cogvideox")),
        config=config,
        dtype=next(module.parameters()).dtype,
    )


# The loader (nodes.models.loader) finds the text encoder's and VAE's entry points on this module too.
from nodes.models.cogvideox_text import load_text_encoder  # noqa: E402, F401
from nodes.models.cogvideox_vae import load_vae  # noqa: E402, F401
