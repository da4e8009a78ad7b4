"""HunyuanVideo 1.5 diffusion models (diffusion_models/hunyuanvideo1.5_*.safetensors): HunyuanVideo's dual-stream
DiT (54 double blocks, no single blocks) on 32-channel video latents at 1/16 of the frame and 1/4 of the frames,
its input the noisy latent joined with a 32-channel image latent and a 1-channel mask (65 channels), fed Qwen2.5-VL
text states through a token refiner, ByT5 glyph states through a small MLP and SigLIP image states through another,
each tagged by a learned condition-type embedding.

Detection: ComfyUI 0.10.0's model_detection (`txt_in.individual_token_refiner.blocks.0.norm1.weight`, image_model
"hunyuan_video"), told from HunyuanVideo 1.0 and Hunyuan Image 2.1 by `vision_in.proj.0.weight` (supported_models.
HunyuanVideo15 asks vision_in_dim). The file is in the names ComfyUI renames on load (`double_blocks.N.img_attn_qkv`
fused, `img_mod.linear`, `txt_in.t_embedder.mlp.0`, `final_layer.adaLN_modulation.1` as (shift, scale),
`vision_in.proj.{0,1,3,4}`, `cond_type_embedding`, `byt5_in.fc1..3`); the renames to diffusers'
HunyuanVideo15Transformer3DModel follow diffusers' conversion script for the authors' file, with q/k/v split.

`apply` drives it with ComfyUI's model semantics (model_base.HunyuanVideo15): the timestep sigma x 1000 (flow,
shift 7), the conditioning's image latent (process_latent_in'd) and mask joined as extra input channels, text
tokens after the image and glyph tokens, no image or glyph tokens at all when the conditioning has none.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models.components import DiffusionModel
from nodes.models.flux_keys import count_blocks, find_prefix, strip_prefix
from nodes.models.hunyuan_image import HEAD, MLP_RATIO, THETA
from nodes.models.hunyuan_image import lora_targets as hunyuan_lora_targets
from nodes.models.hunyuan_image import to_diffusers_layout as hunyuan_to_diffusers
from nodes.models.lora import LoraTargets
from nodes.models.single_file import load_single_file_transformer

MARKER = "txt_in.individual_token_refiner.blocks.0.norm1.weight"
VISION_MARKER = "vision_in.proj.0.weight"
ROPE_AXES = (16, 56, 56)  # ComfyUI's axes for 3-D patches
LATENT_CHANNELS = 32
_OWN = {
    "vision_in.proj.0.": "image_embedder.norm_in.",
    "vision_in.proj.1.": "image_embedder.linear_1.",
    "vision_in.proj.3.": "image_embedder.linear_2.",
    "vision_in.proj.4.": "image_embedder.norm_out.",
    "cond_type_embedding.": "cond_type_embed.",
}


def is_hunyuan_video15(keys, prefix: str) -> bool:
    return prefix + VISION_MARKER in keys


def authors_layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The file's tensors in ComfyUI's input names, unprefixed (bare or under `model.diffusion_model.`)."""
    prefix = find_prefix(state_dict.keys(), MARKER)
    if prefix is None or prefix + VISION_MARKER not in state_dict:
        raise ValueError(f"not a HunyuanVideo 1.5 state dict (no {MARKER} and {VISION_MARKER})")
    sd = strip_prefix(state_dict, prefix)
    if "double_blocks.0.img_attn.qkv.weight" in sd:
        raise ValueError("the file is in ComfyUI's internal names (img_attn.qkv), not the published layout")
    if "double_blocks.0.img_attn_q.weight" in sd:
        raise ValueError("the authors' split q/k/v layout is not read (ComfyUI reads fused img_attn_qkv)")
    return sd


def to_diffusers_layout(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' names: Hunyuan Image 2.1's shared renames (refiner, double blocks, embedders, final layer), the
    timestep embedder under time_embed, the image projection and the condition-type embedding."""
    own, shared = {}, {}
    for key, value in sd.items():
        new = next((n + key[len(o) :] for o, n in _OWN.items() if key.startswith(o)), None)
        (own if new is not None else shared)[new if new is not None else key] = value
    out = hunyuan_to_diffusers(shared)
    for key in list(out):
        if key.startswith("time_guidance_embed.timestep_embedder."):
            out["time_embed." + key[len("time_guidance_embed.") :]] = out.pop(key)
        elif key.startswith("time_guidance_embed."):
            raise ValueError(f"a guidance or meanflow embedder ({key}) is not read for HunyuanVideo 1.5 yet")
    out.update(own)
    return out


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """HunyuanVideo15Transformer3DModel's config from a diffusers-layout state dict's shapes and ComfyUI's fixed
    choices (128-wide heads, rotary axes 16 + 56 + 56, theta 256, MLP ratio 4)."""
    patch = sd["x_embedder.proj.weight"]
    hidden = int(patch.shape[0])
    if hidden % HEAD:
        raise ValueError(f"width {hidden} is not a multiple of the {HEAD}-wide heads")
    if patch.dim() != 5:
        raise ValueError("the patch embedder is not 3-D")
    if count_blocks(sd, "single_transformer_blocks"):
        raise ValueError("single-stream blocks are not part of HunyuanVideo 1.5")
    mlp = int(sd["transformer_blocks.0.ff.net.0.proj.weight"].shape[0])
    if mlp != int(hidden * MLP_RATIO):
        raise ValueError(f"MLP width {mlp} is not {MLP_RATIO:g} x the width {hidden}")
    p_t, p_h, p_w = (int(s) for s in patch.shape[2:])
    if p_h != p_w:
        raise ValueError(f"non-square patches {p_h}x{p_w}")
    out_channels = int(sd["proj_out.weight"].shape[0]) // (p_t * p_h * p_w)
    if int(patch.shape[1]) != 2 * out_channels + 1:  # noise, image latent, mask (ComfyUI's concat_cond)
        raise ValueError(
            f"{int(patch.shape[1])} input channels: the SR-distilled 1080p model (98) is not supported yet"
        )
    byt5 = sd.get("context_embedder_2.linear_1.weight")
    if byt5 is None:
        raise ValueError("no ByT5 mapper (byt5_in)")
    return {
        "in_channels": int(patch.shape[1]),
        "out_channels": out_channels,
        "num_attention_heads": hidden // HEAD,
        "attention_head_dim": HEAD,
        "num_layers": count_blocks(sd, "transformer_blocks"),
        "num_refiner_layers": count_blocks(sd, "context_embedder.token_refiner.refiner_blocks"),
        "mlp_ratio": MLP_RATIO,
        "patch_size": p_h,
        "patch_size_t": p_t,
        "text_embed_dim": int(sd["context_embedder.proj_in.weight"].shape[1]),
        "text_embed_2_dim": int(byt5.shape[1]),
        "image_embed_dim": int(sd["image_embedder.norm_in.weight"].shape[0]),
        "rope_theta": THETA,
        "rope_axes_dim": ROPE_AXES,
    }


def lora_targets(sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    return hunyuan_lora_targets(sd)


def _batched(t: torch.Tensor, b: int) -> torch.Tensor:
    return t.expand(b, *t.shape[1:]) if t.shape[0] == 1 and b > 1 else t


def concat_channels(x: torch.Tensor, extra: int, cond: dict[str, Any], fmt_in, upscale) -> torch.Tensor | None:
    """ComfyUI's model_base.HunyuanVideo15.concat_cond: the image latent (process_latent_in'd, resized to the
    noise) and 1 - mask (zeros without one) joined after the noise; None when the model takes no extra channels."""
    if extra == 0:
        return None
    image = cond.get("concat_latent_image")
    if image is None:
        image = torch.zeros(x.shape[0], extra - 1, *x.shape[2:], dtype=x.dtype)
    else:
        image = upscale(image.float(), x.shape[-1], x.shape[-2])
        image = torch.cat([fmt_in(c) for c in image.split(LATENT_CHANNELS, dim=1)], dim=1)
        image = resize_to_batch(image, x.shape[0])
    mask = cond.get("concat_mask", cond.get("denoise_mask"))
    if mask is None:
        mask = torch.zeros_like(x[:, :1])
    else:
        mask = upscale(1.0 - mask.float(), x.shape[-1], x.shape[-2])
        if mask.shape[-3] < x.shape[-3]:
            mask = torch.nn.functional.pad(mask, (0, 0, 0, 0, 0, x.shape[-3] - mask.shape[-3]))
        mask = resize_to_batch(mask, x.shape[0])
    return torch.cat([image, mask], dim=1)


def resize_to_batch(t: torch.Tensor, b: int) -> torch.Tensor:
    """ComfyUI's utils.resize_to_batch_size for the cases its conditioning takes: equal, repeated or cut."""
    if t.shape[0] == b:
        return t
    if t.shape[0] > b:
        return t[:b]
    reps = math.ceil(b / t.shape[0])
    return t.repeat(reps, *([1] * (t.dim() - 1)))[:b]


def video_upscale(t: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """ComfyUI's common_upscale(bilinear, center) on [B,C,T,H,W] to the noise's size (identity at equal size)."""
    from nodes.upscale import common_upscale

    if t.shape[-1] == width and t.shape[-2] == height:
        return t
    return common_upscale(t, width, height, "bilinear", "center")


@dataclass
class HunyuanVideo15DiffusionModel(DiffusionModel):
    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        for key, what in (("control", "ControlNets"), ("ref_latents", "reference latents")):
            if cond.get(key):
                raise NotImplementedError(f"{what} are not supported for HunyuanVideo 1.5 models")
        if x.dim() != 5:
            raise ValueError(f"HunyuanVideo 1.5 takes [B,32,T,H,W] latents; this one is {tuple(x.shape)}")
        joined = cond.get("concat")  # the sampler's (concat_image below); else the conditioning's own keys
        if joined is None:
            joined = self.concat_image(cond.get("concat_latent_image"), x, cond.get("concat_mask"))
        hidden = x if joined is None else torch.cat([x, joined.to(x.device, x.dtype)], dim=1)
        return self.network(hidden, timestep, cond)

    def concat_image(
        self, image: torch.Tensor | None, x: torch.Tensor, mask: torch.Tensor | None = None, mask_index: int = 0
    ) -> torch.Tensor | None:
        """The image latent and 1 - mask joined after the noise (model_base.HunyuanVideo15.concat_cond)."""
        extra = self.module.config.in_channels - x.shape[1]
        cond = {"concat_latent_image": image, "concat_mask": mask}
        joined = concat_channels(x.cpu(), extra, cond, self.latent_format.process_in, video_upscale)
        return None if joined is None else joined.to(x.device)

    def network(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        """The transformer on its full input channels (ComfyUI's diffusion_model call): text, then glyph and image
        tokens where the conditioning has them."""
        module = self.module
        b = x.shape[0]
        context = _batched(cond["context"].to(x.device, self.dtype), b)
        mask = cond.get("attention_mask")
        mask = (
            torch.ones(context.shape[:2], dtype=torch.bool, device=x.device)
            if mask is None
            else _batched(mask.to(x.device).bool().reshape(-1, context.shape[1]), b)
        )
        byt5 = cond.get("conditioning_byt5small")
        if byt5 is None:  # ComfyUI adds no glyph tokens: an empty sequence gives the same attention
            byt5 = torch.zeros(b, 0, module.config.text_embed_2_dim, device=x.device, dtype=self.dtype)
        byt5 = _batched(byt5.to(x.device, self.dtype), b)
        vision = cond.get("clip_vision_output")
        vision = cond.get("clip_fea_last") if vision is None else vision.last_hidden_state
        if vision is None:  # likewise no image tokens
            image = torch.zeros(b, 0, module.config.image_embed_dim, device=x.device, dtype=self.dtype)
        else:
            image = _batched(vision.to(x.device, self.dtype), b)
        t = torch.as_tensor(timestep, dtype=torch.float32, device=x.device).reshape(-1)
        out = module(
            hidden_states=x.to(self.dtype),
            timestep=t.expand(b) if t.numel() == 1 else t,
            encoder_hidden_states=context,
            encoder_attention_mask=mask,
            encoder_hidden_states_2=byt5,
            encoder_attention_mask_2=torch.ones(byt5.shape[:2], dtype=torch.bool, device=x.device),
            image_embeds=image,
            return_dict=False,
        )[0]
        return out.float()


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> HunyuanVideo15DiffusionModel:
    """A HunyuanVideo 1.5 DiffusionModel from its published file, LoRAs merged in the file's names; computed in
    float32."""
    from diffusers import HunyuanVideo15Transformer3DModel
    from diffusers.models.transformers.transformer_hunyuan_video15 import HunyuanVideo15ByT5TextProjection

    byt5_hidden: list[int] = []  # the glyph mapper's width, read with the config (diffusers and ComfyUI fix 2048)

    def checked(sd: dict[str, torch.Tensor]) -> dict[str, Any]:
        config = infer_config(sd)
        byt5_hidden.append(int(sd["context_embedder_2.linear_1.weight"].shape[0]))
        return config

    def build(**config: Any) -> torch.nn.Module:
        module = HunyuanVideo15Transformer3DModel(**config)
        if byt5_hidden[0] != module.context_embedder_2.linear_2.in_features:
            module.context_embedder_2 = HunyuanVideo15ByT5TextProjection(
                config["text_embed_2_dim"], byt5_hidden[0], config["num_attention_heads"] * HEAD
            )
        return module

    module, config = load_single_file_transformer(
        ref,
        state_dict,
        what="HunyuanVideo 1.5 transformer",
        layout=authors_layout,
        lora_targets=lora_targets,
        convert=to_diffusers_layout,
        infer_config=checked,
        model_class=build,
    )
    return HunyuanVideo15DiffusionModel(
        arch="hunyuan_video15",
        module=module,
        latent_format=latent_format("hunyuan_video15"),
        sampling=dict(sampling_config("hunyuan_video15")),
        config=config,
    )


# The loader (nodes.models.loader) finds every HunyuanVideo 1.5 entry point on this module.
from nodes.models.hunyuan_video15_text import load_text_encoder  # noqa: E402
from nodes.models.hunyuan_video15_vae import load_vae  # noqa: E402

__all__ = [
    "authors_layout",
    "infer_config",
    "load_diffusion_model",
    "load_text_encoder",
    "load_vae",
    "lora_targets",
    "to_diffusers_layout",
]
