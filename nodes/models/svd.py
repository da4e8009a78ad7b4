"""Stable Video Diffusion (img2vid) from the checkpoint Stability ships (svd.safetensors, svd_xt.safetensors): the
VideoUNet under `model.diffusion_model.`, the VAE with a temporal decoder under `first_stage_model.`, the CLIP ViT-H
image encoder under `conditioner.embedders.0.open_clip.model.visual.`.

ComfyUI 0.3.64 tells the UNet by its temporal transformer blocks (model_detection: `time_stack.0.attn1` in an
input block's transformer) and samples it as supported_models.SVD_img2vid: V_PREDICTION_EDM (v-prediction on
ModelSamplingContinuousEDM, sigma_data 1) between sigma 0.002 and 700, the SD1.5 latent format, and an ADM vector
of the embedded (fps - 1, motion bucket, augmentation level), 256 wide each (model_base.SVD_img2vid). The latent's
batch is the video's frames; the image latent joins the input channels (c_concat).

The networks are diffusers' UNetSpatioTemporalConditionModel and AutoencoderKLTemporalDecoder (the same blocks:
ResBlocks with a temporal (3,1,1) ResBlock blended in by a learned factor, spatial transformers with a temporal
transformer and frame-position embedding blended in, and a decoder whose ResBlocks and output conv mix frames),
filled from the ldm names by the mapping below (read off both layouts' keys; diffusers ships no single-file
conversion for SVD)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config

from .components import DiffusionModel, VAEModel
from .detect import SVD_CLIP_VISION_PREFIX
from .errors import ModelLoadError
from .unet import UNetLayout, block_map, infer_layout, resize_to_batch_size, strip_prefix
from .vae import crop_to_multiple
from .vae import ldm_to_diffusers as vae_ldm_to_diffusers

UNET_PREFIX = "model.diffusion_model."
VAE_PREFIX = "first_stage_model."
CLIP_VISION_PREFIX = SVD_CLIP_VISION_PREFIX  # where the checkpoint keeps its image encoder
TEMPORAL_VAE_MARKER = "decoder.mid.block_1.mix_factor"  # comfy/sd.py's test for the temporal decoder
ADM_EMBED = 256  # each of fps - 1, motion bucket and augmentation is embedded 256 wide (ComfyUI's Timestep(256))
SVD_ADM = 3 * ADM_EMBED  # SV3D's is one embedding (256): a different model
HEAD_DIM = 64  # supported_models.SVD_img2vid: num_head_channels 64
DEFAULT_ADM = (6, 127, 0.0)
RESNET_NORM_EPS = 1e-5  # model_base.SVD_img2vid.encode_adm's defaults: fps, motion bucket, augmentation

RESNET_RENAMES = {  # an ldm ResBlock's layers -> diffusers' ResnetBlock2D / TemporalResnetBlock names
    "in_layers.0": "norm1",
    "in_layers.2": "conv1",
    "out_layers.0": "norm2",
    "out_layers.3": "conv2",
    "emb_layers.1": "time_emb_proj",
    "skip_connection": "conv_shortcut",
}


def adm_width(shapes: Mapping[str, Any], prefix: str) -> int | None:
    shape = shapes.get(prefix + "label_emb.0.0.weight")
    return None if shape is None else int(shape.shape[1] if isinstance(shape, torch.Tensor) else shape[1])


def split_block(key: str, blocks: Mapping[str, Any]) -> tuple[str, str] | None:
    """(the longest block prefix of `key` in `blocks`, the rest of the key), or None."""
    parts = key.split(".")
    for n in range(min(5, len(parts) - 1), 0, -1):
        prefix = ".".join(parts[:n]) + "."
        if prefix in blocks:
            return prefix, key[len(prefix) :]
    return None


def _resnet_key(rest: str) -> str:
    """A VideoResBlock tensor's diffusers name inside SpatioTemporalResBlock."""
    if rest.startswith("time_mixer."):
        return rest
    if rest.startswith("time_stack."):
        head, _, tail = rest[len("time_stack.") :].rpartition(".")
        return f"temporal_res_block.{RESNET_RENAMES.get(head, head)}.{tail}"
    head, _, tail = rest.rpartition(".")
    return f"spatial_res_block.{RESNET_RENAMES.get(head, head)}.{tail}"


def _transformer_key(rest: str) -> str:
    """A SpatialVideoTransformer tensor's diffusers name inside TransformerSpatioTemporalModel."""
    if rest.startswith("time_stack."):
        return "temporal_transformer_blocks." + rest[len("time_stack.") :]
    if rest.startswith("time_pos_embed."):
        index, _, tail = rest[len("time_pos_embed.") :].partition(".")
        return f"time_pos_embed.linear_{1 if index == '0' else 2}.{tail}"
    return rest


def unet_to_diffusers(sd: Mapping[str, torch.Tensor], layout: UNetLayout, path: str | None) -> dict[str, torch.Tensor]:
    """Un-prefixed VideoUNet keys -> UNetSpatioTemporalConditionModel keys."""
    blocks = block_map(layout)
    out = {}
    for key, v in sd.items():
        hit = split_block(key, blocks)
        if hit is None:
            raise ModelLoadError(path, f"unexpected SVD UNet tensor {key}")
        prefix, rest = hit
        target, resnet = blocks[prefix]
        if resnet:
            rest = _resnet_key(rest)
        elif ".attentions." in target:
            rest = _transformer_key(rest)
        out[target + rest] = v
    return out


def unet_config(layout: UNetLayout, path: str | None) -> dict[str, Any]:
    """UNetSpatioTemporalConditionModel's arguments for a VideoUNet layout (SVD's: attention on every level but the
    last, one middle transformer, as many ResBlocks on every level)."""
    res = {len(d) for d in layout.down_depths}
    attn = [bool(d) and d[0] > 0 for d in layout.down_depths]
    if len(res) != 1 or attn[-1] or not all(attn[:-1]) or not layout.mid_depth:
        raise ModelLoadError(
            path, "an SVD UNet whose levels differ from SVD's (attention on all but the last) is not supported"
        )
    if any(c % HEAD_DIM for c in layout.channels):
        raise ModelLoadError(path, f"SVD UNet widths {layout.channels} are not multiples of its {HEAD_DIM}-wide heads")
    depths = {d for level in layout.down_depths for d in level if d} | {layout.mid_depth}
    if len(depths) != 1:
        raise ModelLoadError(path, f"SVD UNet transformer depths {sorted(depths)} differ between levels")
    n = layout.levels
    return {
        "sample_size": 96,
        "in_channels": layout.in_channels,
        "out_channels": layout.out_channels,
        "down_block_types": ("CrossAttnDownBlockSpatioTemporal",) * (n - 1) + ("DownBlockSpatioTemporal",),
        "up_block_types": ("UpBlockSpatioTemporal",) + ("CrossAttnUpBlockSpatioTemporal",) * (n - 1),
        "block_out_channels": tuple(layout.channels),
        "addition_time_embed_dim": ADM_EMBED,
        "projection_class_embeddings_input_dim": layout.adm_in,
        "layers_per_block": res.pop(),
        "cross_attention_dim": layout.context_dim,
        "transformer_layers_per_block": depths.pop(),
        "num_attention_heads": tuple(c // HEAD_DIM for c in layout.channels),
        "num_frames": 25,
    }


@dataclass
class SVDDiffusionModel(DiffusionModel):
    """SVD's UNet behind ComfyUI's apply convention: a batch of k videos of n frames each, [k*n, 4, H, W]."""

    def concat_image(
        self, image: torch.Tensor | None, x: torch.Tensor, mask: torch.Tensor | None = None, mask_index: int = 0
    ) -> torch.Tensor | None:
        """model_base.SVD_img2vid's c_concat: the image latent (raw, zeros without one) resized to the input (bilinear,
        centre crop) and spread over its frames."""
        if image is None:
            return torch.zeros_like(x)
        image = image.to(x.device, x.dtype)
        if image.shape[1:] != x.shape[1:]:
            from nodes.upscale import common_upscale

            image = common_upscale(image, x.shape[-1], x.shape[-2], "bilinear", "center")
        return resize_to_batch_size(image, x.shape[0])

    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control"):
            raise NotImplementedError("ControlNets are not supported for Stable Video Diffusion models")
        frames = int(cond.get("num_video_frames", x.shape[0]))
        if x.dim() != 4 or x.shape[0] % frames:
            raise ValueError(f"SVD denoises frames as a batch [frames, 4, H, W], got {tuple(x.shape)}")
        videos = x.shape[0] // frames
        if cond.get("concat") is not None:
            x = torch.cat([x, cond["concat"].to(x)], dim=1)
        t = torch.as_tensor(timestep, dtype=torch.float32, device=x.device).reshape(-1).expand(x.shape[0])
        adm = cond.get("svd_adm")
        if adm is None:
            adm = torch.tensor([DEFAULT_ADM], dtype=torch.float32).expand(x.shape[0], -1)
        added = adm.to(x.device, torch.float32)[::frames].clone()
        added[:, 0] -= 1  # the network takes fps - 1 (ComfyUI's fps_id)
        context = cond["context"].to(x.device, self.dtype)
        module = self.module
        out = module(
            x.to(self.dtype).reshape(videos, frames, *x.shape[1:]),
            t[::frames],
            encoder_hidden_states=context[::frames],
            added_time_ids=added,
            return_dict=False,
        )[0]
        return out.reshape(videos * frames, *out.shape[2:]).float()


def resnet_norms_eps(module: torch.nn.Module) -> None:
    """Every ResBlock GroupNorm at ComfyUI's (and the released model's) epsilon, 1e-5: diffusers builds the ResBlocks
    of its down blocks with attention at 1e-6. The transformers' input norms keep 1e-6 in both."""
    from diffusers.models.resnet import SpatioTemporalResBlock

    for block in module.modules():
        if isinstance(block, SpatioTemporalResBlock):
            for half in (block.spatial_res_block, block.temporal_res_block):
                half.norm1.eps = half.norm2.eps = RESNET_NORM_EPS


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> SVDDiffusionModel:
    """The SVD UNet of a checkpoint (or a bare UNet file in ldm names); float32 compute, as ComfyUI on a CPU."""
    from diffusers import UNetSpatioTemporalConditionModel

    from .safetensors_io import build_module

    path = ref.sources[0] if ref.sources else None
    if ref.patches:
        raise ModelLoadError(path, "LoRAs on Stable Video Diffusion models are not supported yet")
    prefix = UNET_PREFIX if any(k.startswith(UNET_PREFIX) for k in state_dict) else ""
    sd = {k: v.float() for k, v in strip_prefix(dict(state_dict), prefix).items()} if prefix else dict(state_dict)
    if not prefix:
        sd = {k: v.float() for k, v in sd.items() if not k.startswith((VAE_PREFIX, "conditioner."))}
    width = adm_width(sd, "")
    if width != SVD_ADM:
        raise ModelLoadError(
            path,
            f"an SVD-style video UNet with a {width}-wide ADM input (SV3D's is 256) is not supported; SVD's is 768",
        )
    layout = infer_layout({k: tuple(v.shape) for k, v in sd.items()}, path)
    config = unet_config(layout, path)
    module = build_module(
        lambda: UNetSpatioTemporalConditionModel(**config), unet_to_diffusers(sd, layout, path), path, "SVD UNet"
    )
    resnet_norms_eps(module)
    return SVDDiffusionModel(
        arch="svd",
        module=module,
        latent_format=latent_format("svd"),
        sampling=dict(sampling_config("svd")),
        config=config,
    )


# ---- the VAE with the temporal decoder -------------------------------------------------------------------


def vae_to_diffusers(sd: Mapping[str, torch.Tensor], path: str | None) -> dict[str, torch.Tensor]:
    """ldm VAE keys with ComfyUI's temporal decoder (temporal_ae.VideoDecoder) -> AutoencoderKLTemporalDecoder keys:
    the plain VAE mapping, then each decoder ResBlock split into its spatial and temporal halves."""
    out = {}
    for key, v in vae_ldm_to_diffusers(dict(sd), path).items():
        if key.startswith("decoder.conv_out.time_mix_conv."):
            key = "decoder.time_conv_out." + key.rsplit(".", 1)[1]
        elif key.startswith("decoder.") and ".resnets." in key:
            head, _, rest = key.partition(".resnets.")
            index, _, rest = rest.partition(".")
            if rest == "mix_factor":
                rest = "time_mixer.mix_factor"
            elif rest.startswith("time_stack."):
                name, _, tail = rest[len("time_stack.") :].rpartition(".")
                rest = f"temporal_res_block.{RESNET_RENAMES.get(name, name)}.{tail}"
            else:
                rest = "spatial_res_block." + rest
            key = f"{head}.resnets.{index}.{rest}"
        out[key] = v
    return out


class TemporalVAE(VAEModel):
    """SVD's VAE as ComfyUI runs it: the SD encoder (the posterior's mode), and a decoder that treats all the frames
    it is given as one video (ComfyUI decodes a batch at once when it fits in memory, as the tiny one does)."""

    @torch.no_grad()
    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        pixels = crop_to_multiple(pixels, self.downscale)
        x = pixels[..., :3].movedim(-1, 1).float() * 2.0 - 1.0
        moments = self.module.encoder(x)
        return moments[:, : self.latent_channels].float()

    @torch.no_grad()
    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        if latent.dim() != 4 or latent.shape[1] != self.latent_channels:
            raise ValueError(
                f"this VAE takes {self.latent_channels}-channel latents [frames, C, H, W], got {tuple(latent.shape)}"
            )
        frames = latent.shape[0]
        indicator = torch.zeros(1, frames, dtype=torch.float32, device=latent.device)
        x = self.module.decoder(latent.float(), num_frames=frames, image_only_indicator=indicator)
        return ((x.float() + 1.0) / 2.0).clamp(0.0, 1.0).movedim(1, -1)


def load_vae(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> TemporalVAE:
    from diffusers import AutoencoderKLTemporalDecoder

    from .safetensors_io import build_module

    path = ref.sources[0] if ref.sources else None
    sd = (
        strip_prefix(dict(state_dict), VAE_PREFIX)
        if any(k.startswith(VAE_PREFIX) for k in state_dict)
        else dict(state_dict)
    )
    if TEMPORAL_VAE_MARKER not in sd:
        raise ModelLoadError(path, "holds no SVD VAE (no temporal decoder: decoder.mid.block_1.mix_factor)")
    dsd = {k: v.float() for k, v in vae_to_diffusers(sd, path).items()}
    channels = []
    while f"encoder.down_blocks.{len(channels)}.resnets.0.conv2.weight" in dsd:
        channels.append(dsd[f"encoder.down_blocks.{len(channels)}.resnets.0.conv2.weight"].shape[0])
    layers = sum(1 for k in dsd if k.startswith("encoder.down_blocks.0.resnets.") and k.endswith(".conv1.weight"))
    latent = dsd["decoder.conv_in.weight"].shape[1]
    config = {"block_out_channels": tuple(channels), "layers_per_block": layers, "latent_channels": latent}
    config["down_block_types"] = ("DownEncoderBlock2D",) * len(channels)
    # ComfyUI's AutoencodingEngine has no quant_conv: diffusers' is the identity here
    dsd["quant_conv.weight"] = torch.eye(2 * latent).reshape(2 * latent, 2 * latent, 1, 1)
    dsd["quant_conv.bias"] = torch.zeros(2 * latent)
    module = build_module(lambda: AutoencoderKLTemporalDecoder(**config), dsd, path, "SVD VAE")
    return TemporalVAE(arch="svd", module=module, latent_channels=latent, downscale=2 ** (len(channels) - 1))
