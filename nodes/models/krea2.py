"""Krea 2 diffusion models (single-stream DiT fed a stack of Qwen3-VL hidden states through a small text-fusion
transformer) from the files ComfyUI users download (diffusion_models/krea2_*.safetensors: Krea's own names,
`first.`, `blocks.N.attn.wq`, `txtfusion.`, `last.`, bare or under `model.diffusion_model.`).

Detection and layout: diffusers 0.42's single-file support (CHECKPOINT_KEY_NAMES["krea2"] =
`txtfusion.projector.weight`, and convert_krea2_transformer_checkpoint_to_diffusers, which this module calls).
The network is diffusers' Krea2Transformer2DModel, its config read from the tensor shapes. `apply` drives it with
ComfyUI's model semantics: a [B,16,H,W] latent (Qwen-Image's VAE), padded circularly to 2x2 patches and packed
as diffusers' pipeline packs it, sigma as the timestep, and the text states as the context; the context is
[B,T,L,D] (L tapped layers) or the same flattened to [B,T,L*D], the form conditioning travels in.
The text-to-image numbers are checked against diffusers' forward on the same weights (tests/models/test_krea2.py);
reference latents (TextEncodeQwenImageEditPlus with a VAE, placed by FluxKontextMultiReferenceLatentMethod) follow
today's ComfyUI Krea 2 and are checked against its module code (tests/models/test_krea2_reference.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from diffusers import Krea2Transformer2DModel
from diffusers.loaders.single_file_utils import (
    convert_krea2_transformer_checkpoint_to_diffusers,
)

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models.components import DiffusionModel
from nodes.models.detect import KREA2_MARKER
from nodes.models.flux_keys import count_blocks, find_prefix, strip_prefix
from nodes.models.fp8 import dequantize_scaled_fp8
from nodes.models.lora import LoraTargets
from nodes.models.single_file import load_single_file_transformer

PATCH = 2


def krea_layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Krea's names, unprefixed, with ComfyUI's scaled-fp8 layers multiplied out (krea2_turbo_fp8_scaled)."""
    prefix = find_prefix(state_dict.keys(), KREA2_MARKER)
    if prefix is None:
        raise ValueError(f"not a Krea 2 state dict (no {KREA2_MARKER})")
    return strip_prefix(dequantize_scaled_fp8(state_dict), prefix)


def to_diffusers_layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' names from Krea's file (see krea_layout), by diffusers' own single-file converter."""
    return convert_krea2_transformer_checkpoint_to_diffusers(krea_layout(state_dict))


def lora_targets(krea_sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    """The names a Krea 2 LoRA may give a layer, for a state dict in Krea's (the file's, unprefixed) names:
    Krea's own (bare or under `diffusion_model.`, as ai-toolkit writes them; kohya's `lora_unet_` with
    underscores) and diffusers' (bare or under `transformer.` or `diffusion_model.`)."""
    targets = LoraTargets(
        ("lora_unet_", "diffusion_model.", "transformer.") + tuple(sorted({k.split(".")[0] + "." for k in krea_sd})), {}
    )
    for key, value in krea_sd.items():
        if not key.endswith(".weight") or value.dim() != 2:
            continue
        name = key[: -len(".weight")]
        (theirs,) = convert_krea2_transformer_checkpoint_to_diffusers({key: value})
        diffusers_name = theirs[: -len(".weight")]
        targets.add(
            key,
            name,
            "diffusion_model." + name,
            "lora_unet_" + name.replace(".", "_"),
            diffusers_name,
            "transformer." + diffusers_name,
            "diffusion_model." + diffusers_name,  # ComfyUI's Krea 2 key map names diffusers' layers so too
        )
    return targets


def _heads(width: int, head_dim: int, what: str) -> int:
    if width % head_dim:
        raise ValueError(f"{what} width {width} is not a multiple of the head width {head_dim}")
    return width // head_dim


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Krea2Transformer2DModel's config from a diffusers-layout state dict's shapes. The rotary split, which
    no shape carries, keeps diffusers' proportions (a quarter of the head for the frame axis, the rest halved)."""
    hidden, in_channels = sd["img_in.weight"].shape
    head_dim = int(sd["transformer_blocks.0.attn.norm_q.weight"].shape[0])
    text_dim = int(sd["txt_in.norm.weight"].shape[0])
    text_head = int(sd["text_fusion.layerwise_blocks.0.attn.norm_q.weight"].shape[0])
    if head_dim % 8:
        raise ValueError(f"head width {head_dim} is not a multiple of 8 (three rotary axes of even widths)")
    frame = head_dim // 4
    side = (head_dim - frame) // 2
    return {
        "in_channels": int(in_channels),
        "num_layers": count_blocks(sd, "transformer_blocks"),
        "attention_head_dim": head_dim,
        "num_attention_heads": _heads(int(hidden), head_dim, "model"),
        "num_key_value_heads": _heads(int(sd["transformer_blocks.0.attn.to_k.weight"].shape[0]), head_dim, "key"),
        "intermediate_size": int(sd["transformer_blocks.0.ff.gate.weight"].shape[0]),
        "timestep_embed_dim": int(sd["time_embed.linear_1.weight"].shape[1]),
        "text_hidden_dim": text_dim,
        "num_text_layers": int(sd["text_fusion.projector.weight"].shape[1]),
        "text_num_attention_heads": _heads(
            int(sd["text_fusion.layerwise_blocks.0.attn.to_q.weight"].shape[0]), text_head, "text query"
        ),
        "text_num_key_value_heads": _heads(
            int(sd["text_fusion.layerwise_blocks.0.attn.to_k.weight"].shape[0]), text_head, "text key"
        ),
        "text_intermediate_size": int(sd["text_fusion.layerwise_blocks.0.ff.gate.weight"].shape[0]),
        "num_layerwise_text_blocks": count_blocks(sd, "text_fusion.layerwise_blocks"),
        "num_refiner_text_blocks": count_blocks(sd, "text_fusion.refiner_blocks"),
        "axes_dims_rope": (frame, side, head_dim - frame - side),
    }


def image_positions(text_len: int, rows: int, cols: int) -> torch.Tensor:
    """[(text_len + rows*cols), 3] rotary coordinates: text at the origin, image cells at (0, row, col)."""
    grid = torch.zeros(rows, cols, 3)
    grid[..., 1] = torch.arange(rows, dtype=torch.float32)[:, None]
    grid[..., 2] = torch.arange(cols, dtype=torch.float32)[None, :]
    return torch.cat([torch.zeros(text_len, 3), grid.reshape(-1, 3)])


def pack(latent: torch.Tensor) -> tuple[torch.Tensor, int, int]:
    """[B,C,H,W] (or one frame of [B,C,1,H,W]) as [B, rows*cols, C*4] 2x2 patches, padded circularly."""
    if latent.dim() == 5:
        latent = latent.movedim(2, 1).flatten(0, 1)
    b, c, h, w = latent.shape
    padded = F.pad(latent, (0, (-w) % PATCH, 0, (-h) % PATCH), mode="circular")
    rows, cols = padded.shape[-2] // PATCH, padded.shape[-1] // PATCH
    packed = padded.reshape(b, c, rows, PATCH, cols, PATCH).permute(0, 2, 4, 1, 3, 5)
    return packed.reshape(b, rows * cols, c * PATCH * PATCH), rows, cols


def reference_tokens(refs: list[torch.Tensor], batch: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """ReferenceLatent's latents as image tokens after the noisy image's: reference i (from 1) on its own grid
    from (i, 0, 0), as ComfyUI's Krea 2 places them; each repeated to the batch."""
    tokens, positions = [], []
    for index, ref in enumerate(refs, start=1):
        packed, rows, cols = pack(ref)
        if packed.shape[0] != batch:  # ComfyUI's repeat_to_batch_size: tile, then cut
            packed = packed.repeat(-(-batch // packed.shape[0]), 1, 1)[:batch]
        grid = image_positions(0, rows, cols)
        grid[:, 0] = index
        tokens.append(packed.to(dtype))
        positions.append(grid)
    return torch.cat(tokens, dim=1), torch.cat(positions)


def _modulated_block(block, hidden: torch.Tensor, temb: torch.Tensor, rotary, split: int | None) -> torch.Tensor:
    """One Krea2TransformerBlock; with `split`, the tokens from `split` on are modulated by the second half of
    `temb`'s batch (the references' timestep-zero embedding), the others by the first."""
    mods = (temb.unflatten(-1, (6, -1)) + block.scale_shift_table).unbind(-2)
    if split is None:
        per_token = mods
    else:
        b = hidden.shape[0]
        per_token = [
            torch.cat([m[:b].expand(-1, split, -1), m[b:].expand(-1, hidden.shape[1] - split, -1)], dim=1) for m in mods
        ]
    prescale, preshift, pregate, postscale, postshift, postgate = per_token
    attn = block.attn((1.0 + prescale) * block.norm1(hidden) + preshift, attention_mask=None, image_rotary_emb=rotary)
    hidden = hidden + pregate * attn
    return hidden + postgate * block.ff((1.0 + postscale) * block.norm2(hidden) + postshift)


def forward_with_references(
    module: Krea2Transformer2DModel,
    image: torch.Tensor,
    refs: torch.Tensor,
    context: torch.Tensor,
    timestep: torch.Tensor,
    positions: torch.Tensor,
    method: str,
) -> torch.Tensor:
    """diffusers' Krea2Transformer2DModel forward with reference tokens after the image's (ComfyUI's Krea 2 with
    ref_latents): the output reads the noisy image's tokens only. With "index_timestep_zero" the references
    are modulated with the embedding of timestep 0 (they are clean) in every block; the final layer uses the
    real timestep for all tokens, as ComfyUI's does. Any other method places them the same way at the real
    timestep (ComfyUI's Krea 2 reads only whether a method is set and whether it is this one)."""
    b, image_len, _ = image.shape
    text = module.txt_in(module.text_fusion(context, attention_mask=None))
    hidden = torch.cat([text, module.img_in(torch.cat([image, refs], dim=1))], dim=1)
    temb = module.time_embed(timestep, dtype=hidden.dtype)
    temb_mod = module.time_mod_proj(F.gelu(temb, approximate="tanh"))
    split = None
    if method == "index_timestep_zero":
        zero = module.time_embed(torch.zeros_like(timestep), dtype=hidden.dtype)
        temb_mod = torch.cat([temb_mod, module.time_mod_proj(F.gelu(zero, approximate="tanh"))])
        split = text.shape[1] + image_len
    rotary = module.rotary_emb(positions)
    for block in module.transformer_blocks:
        hidden = _modulated_block(block, hidden, temb_mod, rotary, split)
    hidden = hidden[:, text.shape[1] : text.shape[1] + image_len]
    return module.final_layer(hidden, temb)


@dataclass
class Krea2DiffusionModel(DiffusionModel):
    def text_stack(self, context: torch.Tensor) -> torch.Tensor:
        """The context as [B,T,L,D]; a flattened [B,T,L*D] one is split into the model's L layers."""
        layers, dim = self.config["num_text_layers"], self.config["text_hidden_dim"]
        if context.dim() == 3 and context.shape[-1] == layers * dim:
            return context.unflatten(-1, (layers, dim))
        if context.dim() == 4 and tuple(context.shape[2:]) == (layers, dim):
            return context
        raise ValueError(
            f"Krea 2 takes {layers} stacked text layers of width {dim}; the conditioning is "
            f"{tuple(context.shape)} (encode the prompt with a CLIPLoader of type krea2)"
        )

    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control"):
            raise NotImplementedError("ControlNets are not supported for Krea 2 models")
        module: Krea2Transformer2DModel = self.module
        frames = x.dim() == 5
        if frames:
            if x.shape[2] != 1:
                raise ValueError(f"Krea 2 takes single images; this latent has {x.shape[2]} frames")
            x = x[:, :, 0]
        b, c, h, w = x.shape
        padded = F.pad(x, (0, (-w) % PATCH, 0, (-h) % PATCH), mode="circular")
        rows, cols = padded.shape[-2] // PATCH, padded.shape[-1] // PATCH
        packed = padded.reshape(b, c, rows, PATCH, cols, PATCH).permute(0, 2, 4, 1, 3, 5)
        packed = packed.reshape(b, rows * cols, c * PATCH * PATCH).to(self.dtype)
        context = self.text_stack(cond["context"]).to(x.device, self.dtype)
        context = context.expand(b, -1, -1, -1) if context.shape[0] == 1 else context
        t = torch.as_tensor(timestep, dtype=torch.float32, device=x.device).reshape(-1)
        t = t.expand(b) if t.numel() == 1 else t
        positions = image_positions(context.shape[1], rows, cols).to(x.device)
        method = cond.get("ref_latents_method")
        if cond.get("ref_latents") and method is not None:  # without a method ComfyUI's Krea 2 leaves them out
            refs, ref_positions = reference_tokens(cond["ref_latents"], b, self.dtype)
            out = forward_with_references(
                module, packed, refs, context, t, torch.cat([positions, ref_positions.to(x.device)]), method
            )
        else:
            out = module(
                hidden_states=packed,
                encoder_hidden_states=context,
                timestep=t,
                position_ids=positions,
                return_dict=False,
            )[0]
        out = out.reshape(b, rows, cols, c, PATCH, PATCH).permute(0, 3, 1, 4, 2, 5)
        out = out.reshape(b, c, rows * PATCH, cols * PATCH)[:, :, :h, :w].float()
        return out[:, :, None] if frames else out


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> Krea2DiffusionModel:
    """A Krea 2 DiffusionModel from a bare or `model.diffusion_model.`-prefixed transformer file, LoRAs merged
    (LoraLoaderModelOnly: the templates' style LoRAs). It computes in
    float32 whatever the file's dtype; scaled fp8 is multiplied out, other quantised layouts (int8 ConvRot,
    NVFP4) are refused by name with their extra tensors."""
    module, config = load_single_file_transformer(
        ref,
        state_dict,
        what="Krea 2 transformer",
        layout=krea_layout,
        lora_targets=lora_targets,
        convert=convert_krea2_transformer_checkpoint_to_diffusers,
        infer_config=infer_config,
        model_class=Krea2Transformer2DModel,
    )
    return Krea2DiffusionModel(
        arch="krea2",
        module=module,
        latent_format=latent_format("krea2"),
        sampling=dict(sampling_config("krea2")),
        config=config,
    )


# The loader (nodes.models.loader) finds every Krea 2 entry point on this module; its VAE is Qwen-Image's.
from nodes.models.krea2_text import load_text_encoder

__all__ = [
    "image_positions",
    "infer_config",
    "krea_layout",
    "load_diffusion_model",
    "load_text_encoder",
    "lora_targets",
    "to_diffusers_layout",
]
