"""LTX-Video 0.9's transformer from the checkpoint ComfyUI's users download (ltx-video-2b-v0.9*.safetensors: the
original Lightricks key names under `model.diffusion_model.`, the video VAE under `vae.`, sizes in the metadata
`config` JSON where the file has one).

ComfyUI 0.3.64's model_detection tells it by `adaln_single.emb.timestep_embedder.linear_1.bias` (without PixArt's
`pos_embed.proj.bias`, and, since LTX-2, without `audio_adaln_single`), counts the blocks, takes the head width
from `attn2.to_k` (32 heads) and lets the metadata's "transformer" section override; supported_models.LTXV samples
it as a flux-kind model at shift 2.37 with sigma x 1000 as the timestep. The network is diffusers'
LTXVideoTransformer3DModel (the same blocks: RMS-normed queries and keys across heads, interleaved rotary tables
from the fractional positions, tanh-GELU feed-forward, per-token AdaLN), converted with diffusers' own key mapping.
ComfyUI's positions are given to it as coordinates: each latent cell's pixel position (x8 frames, x32 rows and
columns; the frame axis causally shifted back by 7 where the metadata asks, then in seconds at the frame rate).
A noise mask gives per-token timesteps (0 where LTXVImgToVideo keeps a frame: ComfyUI's LTXV.process_timestep)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch
from diffusers import LTXVideoTransformer3DModel
from diffusers.loaders.single_file_utils import convert_ltx_transformer_checkpoint_to_diffusers

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models.components import DiffusionModel
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import count_blocks, find_prefix, strip_prefix
from nodes.models.ltx2 import file_metadata

TIME_MARKER = "adaln_single.emb.timestep_embedder.linear_1.bias"
SCALE = (8, 32, 32)  # pixel frames, rows, columns per latent cell (ComfyUI's vae_scale_factors)
# LTXVModel's defaults for what neither the tensors nor the metadata say.
DEFAULTS: dict[str, Any] = {
    "num_attention_heads": 32,
    "caption_channels": 4096,
    "positional_embedding_theta": 10000.0,
    "positional_embedding_max_pos": [20, 2048, 2048],
    "causal_temporal_positioning": False,
}


def transformer_config(sd: Mapping[str, torch.Tensor], metadata: Mapping[str, str]) -> dict[str, Any]:
    """ComfyUI's dit_config for the file: counted and measured from the tensors, then the metadata's."""
    config = dict(DEFAULTS)
    config["num_layers"] = count_blocks(sd, "transformer_blocks")
    to_k = sd["transformer_blocks.0.attn2.to_k.weight"]
    config["attention_head_dim"] = to_k.shape[0] // 32
    config["cross_attention_dim"] = to_k.shape[1]
    if "config" in metadata:
        try:
            config.update(json.loads(metadata["config"]).get("transformer", {}))
        except json.JSONDecodeError as e:
            raise ValueError(f"its metadata 'config' is not JSON ({e})") from None
    return config


def diffusers_config(config: Mapping[str, Any], sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """LTXVideoTransformer3DModel's arguments for ComfyUI's LTXVModel settings."""
    max_pos = list(config["positional_embedding_max_pos"])
    if max_pos != [20, 2048, 2048] or float(config["positional_embedding_theta"]) != 10000.0:
        raise ValueError(f"rotary settings {max_pos} / theta {config['positional_embedding_theta']} are not supported")
    channels = sd["patchify_proj.weight"].shape[1]
    return {
        "in_channels": channels,
        "out_channels": channels,
        "num_attention_heads": int(config["num_attention_heads"]),
        "attention_head_dim": int(config["attention_head_dim"]),
        "cross_attention_dim": int(config["cross_attention_dim"]),
        "num_layers": int(config["num_layers"]),
        "caption_channels": int(config["caption_channels"]),
    }


def pixel_coords(shape: torch.Size, frame_rate: float, causal: bool, device: torch.device) -> torch.Tensor:
    """[B,3,N] positions of a [B,C,F,H,W] latent's cells in frame-row-column order: pixels x (8, 32, 32), the
    frame axis shifted back by 7 (clamped at 0) when `causal`, then divided by the frame rate (seconds)."""
    b, _, frames, h, w = shape
    grid = torch.stack(torch.meshgrid(torch.arange(frames), torch.arange(h), torch.arange(w), indexing="ij"))
    coords = grid.reshape(3, -1) * torch.tensor(SCALE).view(3, 1)
    if causal:
        coords[0] = (coords[0] + 1 - SCALE[0]).clamp(min=0)
    coords = coords.to(device, torch.float32)
    coords[0] = coords[0] * (1.0 / frame_rate)
    return coords.unsqueeze(0).expand(b, -1, -1)


@dataclass
class LTXVDiffusionModel(DiffusionModel):
    def inpaint_latent(
        self, ms: Any, sigma: torch.Tensor, noise: torch.Tensor, latent_image: torch.Tensor
    ) -> torch.Tensor:
        """Kept frames stay as they are, un-noised (ComfyUI's LTXV.scale_latent_inpaint)."""
        return latent_image

    def step_timesteps(self, t: torch.Tensor, denoise_mask: torch.Tensor | None) -> torch.Tensor:
        """ComfyUI's LTXV.process_timestep: under a noise mask each cell's timestep is t times its mask."""
        if denoise_mask is None:
            return t
        return denoise_mask * t.reshape(-1, *[1] * (denoise_mask.dim() - 1)).to(denoise_mask)

    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control"):
            raise NotImplementedError("ControlNets are not supported for LTX-Video models")
        if x.dim() != 5:
            raise ValueError(f"LTX-Video denoises video latents [B,128,F,H,W], got {tuple(x.shape)}")
        if cond.get("keyframe_idxs") is not None:
            raise NotImplementedError("LTX-Video 0.9 with guide frames (LTXVAddGuide's keyframe_idxs) is not supported")
        t = torch.as_tensor(timestep, dtype=torch.float32, device=x.device)
        # one timestep per cell (step_timesteps: [B,C,F,H,W]): each token takes its first channel's
        t = t.expand(x.shape[0], *x.shape[1:])[:, 0].flatten(1) if t.dim() == 5 else t.reshape(-1).expand(x.shape[0])
        return self.forward_video(
            x, t, cond["context"], float(cond.get("frame_rate", 25.0)), cond.get("attention_mask")
        )

    def forward_video(
        self,
        x: torch.Tensor,
        t: torch.Tensor,
        context: torch.Tensor,
        frame_rate: float,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The network's raw (velocity) output for a latent [B,128,F,H,W] at timesteps in sigma units ([B] or
        one per token [B,F*H*W]); `attention_mask` [B,T] (1 = attend) masks the text tokens."""
        module: LTXVideoTransformer3DModel = self.module
        b, c, frames, h, w = x.shape
        dtype = self.dtype
        coords = pixel_coords(x.shape, frame_rate, bool(self.config["causal_temporal_positioning"]), x.device)
        mask = None if attention_mask is None else attention_mask.to(x.device).reshape(b, -1)
        out = module(
            hidden_states=x.to(dtype).flatten(2).transpose(1, 2),
            encoder_hidden_states=context.to(x.device, dtype).expand(b, -1, -1),
            timestep=t.to(x.device, torch.float32) * 1000.0,
            encoder_attention_mask=mask,
            video_coords=coords,
            return_dict=False,
        )[0]
        return out.transpose(1, 2).reshape(b, c, frames, h, w).float()


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> LTXVDiffusionModel:
    """The LTX-Video 0.9 DiffusionModel of a checkpoint (or a bare transformer file); float32 compute, as ComfyUI
    runs it on a CPU."""
    from nodes.models.safetensors_io import build_module

    path = ref.sources[0] if ref.sources else None
    try:
        prefix = find_prefix(state_dict.keys(), TIME_MARKER)
        if prefix is None:
            raise ValueError(f"no {TIME_MARKER}")
        sd = strip_prefix(state_dict, prefix)
        config = transformer_config(sd, file_metadata(path))
        kwargs = diffusers_config(config, sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable LTX-Video model: {e}") from None
    if ref.patches:
        raise ModelLoadError(path, "LoRAs on LTX-Video 0.9 models are not supported yet")
    converted = convert_ltx_transformer_checkpoint_to_diffusers({k: v.float() for k, v in sd.items()})
    module = build_module(lambda: LTXVideoTransformer3DModel(**kwargs), converted, path, "LTX-Video transformer")
    return LTXVDiffusionModel(
        arch="ltxv",
        module=module,
        latent_format=latent_format("ltxv"),
        sampling=dict(sampling_config("ltxv")),
        config=config,
    )


def load_vae(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> Any:
    """The checkpoint's video VAE: ComfyUI 0.3.64 builds the same CausalVideoAutoencoder from the metadata's
    block lists as for LTX-2 (nodes/models/ltx2_vae.py), under this family's name. A file without those lists
    (0.9.0's, whose layout ComfyUI guesses from its decoder's width) or with a timestep-conditioned decoder
    (0.9.1's and 0.9.5's, which ComfyUI decodes with unseeded noise mixed in) is refused by name."""
    from nodes.models import ltx2_vae

    path = ref.sources[0] if ref.sources else None
    config = json.loads(file_metadata(path).get("config", "{}")).get("vae")
    if config is None:
        raise ModelLoadError(
            path,
            "an LTX-Video VAE without a 'vae' block list in its metadata (LTX-Video 0.9.0's layout, which ComfyUI "
            "guesses from the decoder's width) is not supported yet",
        )
    if config.get("timestep_conditioning", False):
        raise ModelLoadError(
            path,
            "an LTX-Video VAE whose decoder is timestep-conditioned (0.9.1 / 0.9.5: ComfyUI mixes unseeded noise "
            "into the latent before decoding) is not supported yet",
        )
    return replace(ltx2_vae.load_vae(ref, state_dict), arch="ltxv")
