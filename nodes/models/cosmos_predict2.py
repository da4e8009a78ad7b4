"""Cosmos Predict2 diffusion models (nvidia/Cosmos-Predict2-2B-Text2Image and -14B, the 2B/14B Video2World image-to-video
models; Comfy-Org's cosmos_predict2_*.safetensors in diffusion_models/).

ComfyUI 0.3.64 runs them as comfy/ldm/cosmos/predict2.py's MiniTrainDIT (model_base.CosmosPredict2,
supported_models.CosmosT2IPredict2 / CosmosI2VPredict2), read here for facts: the keys are ComfyUI's (`net.` or
`model.diffusion_model.` prefix or none), detected by `blocks.0.mlp.layer1.weight` with `x_embedder.proj.1.weight`
(nodes.models.detect); the patch embedding takes the latent's 16 channels (text-to-image) or 17 (image-to-video: the
inverted noise mask joined as a channel, model_base's concat key "mask_inverted") and the zero padding-mask channel.
Sampling is Cosmos' rectified flow on EDM sigmas (sigma 0.002..80, sigma_data 1); latents are the Wan 2.1 VAE's
([B,16,T,H,W], latent format Wan21); the text encoder is the old T5-XXL (t5-11b's 1024-wide encoder).

The network runs on diffusers' CosmosTransformer3DModel (diffusers' Cosmos 2.0 converter renames the keys), as
Anima's DiT does. Sizes come from the shapes; what no shape carries follows 0.3.64's model_detection table: RoPE
extrapolation by width and channels, per-block learnable position embeddings only on the 14B image-to-video model.
Under a 5-D noise mask each latent frame takes its own timestep, t times the frame's mean mask (process_timestep),
and kept frames are fed un-noised (scale_latent_inpaint). Checked against ComfyUI 0.3.64's module on the tiny demo
files (tests/models/test_cosmos_predict2.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models.components import DiffusionModel
from nodes.models.detect import ANIMA_PREFIXES, COSMOS_PREDICT2_MARKERS
from nodes.models.flux_keys import count_blocks, strip_prefix
from nodes.models.lora import LoraTargets
from nodes.models.single_file import load_single_file_transformer

PATCH = 2
EPS = 1e-6
LATENT_CHANNELS = 16


def cosmos_predict2_layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The file's tensors under ComfyUI's unprefixed names."""
    keys = set(state_dict)
    prefix = next((p for p in ANIMA_PREFIXES if all(p + m in keys for m in COSMOS_PREDICT2_MARKERS)), None)
    if prefix is None:
        raise ValueError(f"not a Cosmos Predict2 state dict (no {' with '.join(COSMOS_PREDICT2_MARKERS)})")
    return strip_prefix(state_dict, prefix)


def to_module_layout(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """ComfyUI's names -> diffusers' CosmosTransformer3DModel's (diffusers' Cosmos 2.0 converter); the rotary
    table's stored copy (`pos_embedder.*`, recomputed by both) is dropped."""
    from diffusers.loaders.single_file_utils import convert_cosmos_transformer_checkpoint_to_diffusers

    return convert_cosmos_transformer_checkpoint_to_diffusers(
        {k: v for k, v in sd.items() if not k.startswith("pos_embedder.")}
    )


def lora_targets(sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    """The names a Cosmos Predict2 LoRA gives a layer: ComfyUI's, bare, under `diffusion_model.` or kohya's
    `lora_unet_` with underscores."""
    targets = LoraTargets(("lora_unet_", "diffusion_model.") + tuple(sorted({k.split(".")[0] + "." for k in sd})), {})
    for key, value in sd.items():
        if key.endswith(".weight") and value.dim() == 2:
            name = key[: -len(".weight")]
            targets.add(key, name, "diffusion_model." + name, "lora_unet_" + name.replace(".", "_"))
    return targets


def rope_scale(width: int, image_to_video: bool) -> tuple[float, float, float]:
    """(t, h, w) RoPE extrapolation: ComfyUI 0.3.64's model_detection fixes it by channels and width (any other width
    keeps MiniTrainDIT's 1.0)."""
    if not image_to_video:
        return (1.0, 4.0, 4.0)
    return {2048: (1.0, 3.0, 3.0), 5120: (1.0, 2.0, 2.0)}.get(width, (1.0, 1.0, 1.0))


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """CosmosTransformer3DModel's config from the module-layout state dict's shapes."""
    hidden, patch_in = sd["patch_embed.proj.weight"].shape
    head_dim = int(sd["transformer_blocks.0.attn1.norm_q.weight"].shape[0])
    if hidden % head_dim:
        raise ValueError(f"model width {hidden} is not a multiple of its head width {head_dim}")
    in_channels = patch_in // (PATCH * PATCH)  # latent (+ inverted mask) + the padding-mask channel
    if in_channels not in (LATENT_CHANNELS + 1, LATENT_CHANNELS + 2):
        raise ValueError(
            f"the patch embedding takes {in_channels} channels; Cosmos Predict2's take 16 latent channels (17 for "
            "image-to-video) and a padding mask"
        )
    image_to_video = in_channels == LATENT_CHANNELS + 2
    learnable = "learnable_pos_embed.pos_emb_h" in sd
    return {
        "in_channels": int(in_channels),
        "out_channels": int(sd["proj_out.weight"].shape[0]) // (PATCH * PATCH),
        "num_attention_heads": int(hidden) // head_dim,
        "attention_head_dim": head_dim,
        "num_layers": count_blocks(sd, "transformer_blocks"),
        "mlp_ratio": sd["transformer_blocks.0.ff.net.0.proj.weight"].shape[0] / hidden,
        "text_embed_dim": int(sd["transformer_blocks.0.attn2.to_k.weight"].shape[1]),
        "adaln_lora_dim": int(sd["transformer_blocks.0.norm1.linear_1.weight"].shape[0]),
        # ComfyUI computes the rotary table for any size; diffusers only up to max_size.
        "max_size": (128, 1 << 14, 1 << 14) if not learnable else (128, 240, 240),
        "patch_size": (1, PATCH, PATCH),
        "rope_scale": rope_scale(int(hidden), image_to_video),
        # The padding-mask channel (zeros) is joined here, not by diffusers, whose resize needs torchvision.
        "concat_padding_mask": False,
        "extra_pos_embed_type": "learnable" if learnable else None,
    }


def build_network(**config: Any) -> torch.nn.Module:
    from diffusers import CosmosTransformer3DModel

    network = CosmosTransformer3DModel(**config)
    for module in network.modules():  # diffusers' q/k norms default to eps 1e-5; Cosmos' are 1e-6
        if type(module).__name__ == "RMSNorm":
            module.eps = EPS
    return network


def frame_timesteps(t: torch.Tensor, denoise_mask: torch.Tensor | None) -> torch.Tensor:
    """model_base.CosmosPredict2.process_timestep: under a 5-D noise mask, [B,T] timesteps of t times each latent
    frame's mean mask (a kept frame sees 0); else `t`."""
    if denoise_mask is None or denoise_mask.dim() != 5:
        return t
    return denoise_mask.mean(dim=(1, 3, 4)) * t.reshape(-1, 1).to(denoise_mask)


@dataclass
class CosmosPredict2DiffusionModel(DiffusionModel):
    reads_denoise_mask: ClassVar[bool] = True

    @property
    def image_to_video(self) -> bool:
        return self.config["in_channels"] == LATENT_CHANNELS + 2

    def inpaint_latent(
        self, ms: Any, sigma: torch.Tensor, noise: torch.Tensor, latent_image: torch.Tensor
    ) -> torch.Tensor:
        """ComfyUI's CosmosPredict2.scale_latent_inpaint: the clean latent divided by 1 - sigma / (sigma + 1), so
        that the rectified flow's input scaling gives it back un-noised."""
        s = sigma.reshape([sigma.shape[0]] + [1] * (noise.dim() - 1))
        return latent_image / (1.0 - s / (s + 1))

    def step_timesteps(self, t: torch.Tensor, denoise_mask: torch.Tensor | None) -> torch.Tensor:
        return frame_timesteps(t, denoise_mask)

    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control"):
            raise NotImplementedError("ControlNets are not supported for Cosmos Predict2 models")
        if cond.get("ref_latents"):
            raise NotImplementedError("reference latents are not supported for Cosmos Predict2 models")
        frames = x.dim() == 5
        if not frames:
            x = x[:, :, None]
        b, _, t_len, h, w = x.shape
        device, dtype = x.device, self.dtype
        inputs = [x]
        if self.image_to_video:  # model_base's concat key "mask_inverted": 1 - the noise mask, zeros without one
            mask = cond.get("denoise_mask")
            if mask is None:
                inverted = torch.zeros_like(x[:, :1])
            else:
                mask = mask[:, :1].to(x)
                if mask.shape[-2:] != x.shape[-2:]:
                    raise ValueError(f"the noise mask's size {tuple(mask.shape[-2:])} is not the latent's {(h, w)}")
                inverted = 1.0 - (mask if mask.dim() == 5 else mask[:, :, None])
            inputs.append(inverted.expand(b, -1, t_len, -1, -1))
        joined = torch.cat(inputs, dim=1)
        padded = F.pad(joined, (0, (-w) % PATCH, 0, (-h) % PATCH, 0, 0), mode="circular").to(dtype)
        padding = torch.zeros_like(padded[:, :1])  # the padding-mask channel: nothing is padding
        t = torch.as_tensor(timestep, dtype=torch.float32, device=device)
        if t.dim() == 2:  # [B,T] per-frame timesteps -> diffusers' [B,1,T,1,1]
            t = t.expand(b, -1) if t.shape[0] == 1 else t
            t = t[:, None, :, None, None]
        else:
            t = t.reshape(-1)
            t = t.expand(b) if t.numel() == 1 else t
        rate = cond.get("frame_rate")
        out = self.module(
            hidden_states=torch.cat([padded, padding], dim=1),
            timestep=t.to(dtype),
            encoder_hidden_states=cond["context"].to(device, dtype),
            fps=None if rate is None else float(rate),
            return_dict=False,
        )[0]
        out = out[:, :, :t_len, :h, :w].float()
        return out if frames else out[:, :, 0]


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> CosmosPredict2DiffusionModel:
    """A Cosmos Predict2 DiffusionModel from its single file, LoRAs merged."""
    module, config = load_single_file_transformer(
        ref,
        state_dict,
        what="Cosmos Predict2 transformer",
        layout=cosmos_predict2_layout,
        lora_targets=lora_targets,
        convert=to_module_layout,
        infer_config=infer_config,
        model_class=build_network,
    )
    return CosmosPredict2DiffusionModel(
        arch="cosmos_predict2",
        module=module,
        latent_format=latent_format("cosmos_predict2"),
        sampling=dict(sampling_config("cosmos_predict2")),
        config=config,
        dtype=next(module.parameters()).dtype,
    )


# The loader (nodes.models.loader) finds every entry point on this module; the VAE is the Wan 2.1 VAE.
from nodes.models.cosmos_predict2_text import load_text_encoder  # noqa: E402
from nodes.models.qwen_image import load_vae  # noqa: E402

__all__ = ["cosmos_predict2_layout", "infer_config", "load_diffusion_model", "load_text_encoder", "load_vae"]
