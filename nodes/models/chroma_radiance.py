"""Chroma Radiance (lodestones' Chroma1-Radiance, ComfyUI's chroma-radiance-x0): Chroma in pixel space. The image
itself (3 channels in [-1, 1], the pixel_space VAE's "latent") is cut into 16x16 patches that a convolution embeds
(`img_in_patch`), Chroma's transformer runs on them without its final layer, and a per-patch NeRF-like head decodes
each patch's pixels from its hidden state: the pixels with a DCT-like position code are embedded, then GLU MLPs
whose weights the hidden state generates (`nerf_blocks`), folded back into the image and projected to RGB by a
3x3 convolution (`nerf_final_layer_conv`; older files: a linear `nerf_final_layer`).

Detected as ComfyUI's model_detection does (Chroma's keys with `nerf_blocks.0.norm.scale`). The transformer is
diffusers' ChromaTransformer2DModel as for Chroma (nodes/models/chroma.py) with the patch convolution as its input
projection and no output layer; the NeRF head is written here from its published definition (diffusers has no
Radiance). Sizes come from the shapes, except what shapes cannot tell, ComfyUI's constants: 16-pixel patches, DCT
frequencies from the embedder's width. Latents are the pixels (ComfyUI's ChromaRadiance latent format: identity);
sampling is Chroma's (ModelSamplingFlux at 1.15)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from cluster.refs import ModelRef
from nodes.arch import CHROMA_RADIANCE_LATENT
from nodes.models.chroma import (
    MARKER,
    ChromaDiffusionModel,
    build_chroma,
    call_guidance,
    float_weights,
    infer_config,
    to_diffusers_layout,
)
from nodes.models.errors import ModelLoadError
from nodes.models.flux import image_ids, per_batch
from nodes.models.flux_configs import config_for_sources
from nodes.models.flux_keys import count_blocks, find_prefix, strip_prefix

NERF_MARKER = "nerf_blocks.0.norm.scale"
PATCH = 16  # ComfyUI's model_detection: patch_size 16 for every Radiance file
_HEAD_PREFIXES = ("img_in_patch.", "nerf_")


def is_radiance_state_dict(keys: Iterable[str]) -> bool:
    keys = set(keys)
    p = find_prefix(keys, MARKER)
    return p is not None and p + NERF_MARKER in keys


class ScaleRMSNorm(nn.Module):
    """ComfyUI's RMSNorm (its weight is named `scale`), eps 1e-6."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, self.scale.shape, weight=self.scale.to(x.dtype), eps=1e-6)


class NerfEmbedder(nn.Module):
    """A patch's pixels [N, P*P, C] joined by a DCT-like code of each pixel's position, embedded (float32)."""

    def __init__(self, channels: int, hidden: int, freqs: int) -> None:
        super().__init__()
        self.freqs = freqs
        self.embedder = nn.Sequential(nn.Linear(channels + freqs**2, hidden))

    def position_code(self, patch: int, device: torch.device) -> torch.Tensor:
        pos = torch.linspace(0, 1, patch, device=device, dtype=torch.float32)
        pos_y, pos_x = torch.meshgrid(pos, pos, indexing="ij")
        f = torch.linspace(0, self.freqs - 1, self.freqs, device=device, dtype=torch.float32)
        fx, fy = f[None, :, None], f[None, None, :]
        code = torch.cos(pos_x.reshape(-1, 1, 1) * fx * math.pi) * torch.cos(pos_y.reshape(-1, 1, 1) * fy * math.pi)
        return (code / (1 + fx * fy)).reshape(1, -1, self.freqs**2)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        n, p2, _ = pixels.shape
        code = self.position_code(math.isqrt(p2), pixels.device).expand(n, -1, -1)
        x = torch.cat([pixels.float(), code], dim=-1)
        return self.embedder(x.to(self.embedder[0].weight.dtype)).to(pixels.dtype)


class NerfGLUBlock(nn.Module):
    """A GLU MLP over a patch's pixel features whose weights (each column-normalised) its hidden state generates."""

    def __init__(self, hidden: int, width: int, ratio: int) -> None:
        super().__init__()
        self.ratio = ratio
        self.param_generator = nn.Linear(hidden, 3 * width * width * ratio)
        self.norm = ScaleRMSNorm(width)

    def forward(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        n, _, width = x.shape
        gate, value, out = self.param_generator(s).chunk(3, dim=-1)
        gate = F.normalize(gate.view(n, width, width * self.ratio), dim=-2)
        value = F.normalize(value.view(n, width, width * self.ratio), dim=-2)
        out = F.normalize(out.view(n, width * self.ratio, width), dim=-2)
        h = self.norm(x)
        return torch.bmm(F.silu(torch.bmm(h, gate)) * torch.bmm(h, value), out) + x


class NerfFinalLayerConv(nn.Module):
    def __init__(self, width: int, channels: int) -> None:
        super().__init__()
        self.norm = ScaleRMSNorm(width)
        self.conv = nn.Conv2d(width, channels, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(self.norm(x.movedim(1, -1)).movedim(-1, 1))


class NerfFinalLayer(nn.Module):
    def __init__(self, width: int, channels: int) -> None:
        super().__init__()
        self.norm = ScaleRMSNorm(width)
        self.linear = nn.Linear(width, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.norm(x.movedim(1, -1))).movedim(-1, 1)


class _NoOutputLayer(nn.Module):
    """Radiance's transformer has no final layer: the head reads the last hidden states."""

    def forward(self, x: torch.Tensor, emb: torch.Tensor | None = None) -> torch.Tensor:
        return x


class RadianceNetwork(nn.Module):
    def __init__(self, trunk: dict[str, Any], head: dict[str, Any]) -> None:
        super().__init__()
        self.transformer = build_chroma(trunk)
        self.transformer.norm_out = _NoOutputLayer()
        self.transformer.proj_out = nn.Identity()
        hidden = trunk["num_attention_heads"] * trunk["attention_head_dim"]
        channels, width = head["channels"], head["width"]
        self.nerf_image_embedder = NerfEmbedder(channels, width, head["freqs"])
        self.nerf_blocks = nn.ModuleList(NerfGLUBlock(hidden, width, head["ratio"]) for _ in range(head["depth"]))
        if head["final"] == "conv":
            self.nerf_final_layer_conv = NerfFinalLayerConv(width, channels)
        else:
            self.nerf_final_layer = NerfFinalLayer(width, channels)

    def forward(self, img: torch.Tensor, timestep: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        b, c, h, w = img.shape
        tokens = F.unfold(img, kernel_size=PATCH, stride=PATCH).transpose(1, 2)  # [B, L, C*P*P], (c, y, x) order
        h_len, w_len = h // PATCH, w // PATCH
        states = self.transformer(
            hidden_states=tokens,
            encoder_hidden_states=context,
            timestep=timestep,
            img_ids=image_ids(h_len, w_len, img.dtype, img.device),
            txt_ids=torch.zeros(context.shape[1], 3, dtype=img.dtype, device=img.device),
            return_dict=False,
        )[0]
        n = b * tokens.shape[1]
        pixels = tokens.reshape(n, c, PATCH * PATCH).transpose(1, 2)
        x = self.nerf_image_embedder(pixels)
        s = states.reshape(n, -1)
        for block in self.nerf_blocks:
            x = block(x, s)
        x = x.transpose(1, 2).reshape(b, tokens.shape[1], -1).transpose(1, 2)
        x = F.fold(x, output_size=(h, w), kernel_size=PATCH, stride=PATCH)
        final = getattr(self, "nerf_final_layer_conv", None) or self.nerf_final_layer
        return final(x)


@dataclass
class RadianceDiffusionModel(ChromaDiffusionModel):
    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        for key, what in (
            ("control", "ControlNet"),
            ("ref_latents", "reference latents"),
            ("rope_options", "ScaleROPE"),
        ):
            if cond.get(key):
                raise NotImplementedError(f"{what} is not supported for Chroma Radiance models")
        if cond.get("guidance_disabled"):
            raise ValueError("Chroma embeds a guidance value; FluxDisableGuidance leaves it none (ComfyUI fails too)")
        b, _, h, w = x.shape
        img = F.pad(x, (0, (-w) % PATCH, 0, (-h) % PATCH), mode="circular")  # ComfyUI's pad_to_patch_size
        context = cond["context"].to(x.device, self.dtype)
        call_guidance.value = per_batch(cond.get("guidance") or 0.0, b, x.device)
        try:
            out = self.module(img.to(self.dtype), per_batch(timestep, b, x.device), context)
        finally:
            call_guidance.value = None
        return out[:, :, :h, :w].float()


def split_state_dict(sd: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(transformer weights in diffusers' layout, head weights under ComfyUI's names) of a Radiance state dict."""
    p = find_prefix(sd.keys(), MARKER)
    if p is None:
        raise ValueError(f"not a Chroma Radiance transformer (no {MARKER})")
    sd = strip_prefix(sd, p)
    head = {k: v for k, v in sd.items() if k.startswith(_HEAD_PREFIXES)}
    trunk = to_diffusers_layout({k: v for k, v in sd.items() if not k.startswith(_HEAD_PREFIXES)})
    patch = head.pop("img_in_patch.weight")
    if tuple(patch.shape[-2:]) != (PATCH, PATCH):
        raise ValueError(f"img_in_patch is {tuple(patch.shape[-2:])}; Chroma Radiance's patches are {PATCH}x{PATCH}")
    trunk["x_embedder.weight"] = patch.reshape(patch.shape[0], -1)  # the patch convolution as a linear layer
    trunk["x_embedder.bias"] = head.pop("img_in_patch.bias")
    return trunk, head


def head_config(head: Mapping[str, torch.Tensor], channels: int) -> dict[str, Any]:
    width, embed_in = head["nerf_image_embedder.embedder.0.weight"].shape
    freqs = math.isqrt(embed_in - channels)
    if freqs * freqs != embed_in - channels:
        raise ValueError(f"the NeRF embedder takes {embed_in} inputs, not {channels} channels plus a square DCT code")
    generated = head["nerf_blocks.0.param_generator.weight"].shape[0]
    return {
        "channels": channels,
        "width": int(width),
        "freqs": freqs,
        "ratio": generated // (3 * width * width),
        "depth": count_blocks(head, "nerf_blocks"),
        "final": "conv" if "nerf_final_layer_conv.conv.weight" in head else "linear",
    }


def load_diffusion_model(
    ref: ModelRef, state_dict: Mapping[str, torch.Tensor], axes_dim: Iterable[int] | None = None
) -> RadianceDiffusionModel:
    """A Chroma Radiance DiffusionModel from a state dict in ComfyUI's layout (RoPE axes as for Chroma)."""
    from nodes.models.safetensors_io import build_module

    path = ref.sources[0] if ref.sources else None
    try:
        trunk_sd, head_sd = split_state_dict(float_weights(state_dict, path))
        if axes_dim is None:
            axes_dim = config_for_sources(ref.sources)[1].get("axes_dim")
        trunk = infer_config(trunk_sd, axes_dim)
        head = head_config(head_sd, trunk["in_channels"] // PATCH**2)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Chroma Radiance transformer: {e}") from None
    sd = {**{"transformer." + k: v for k, v in trunk_sd.items()}, **head_sd}
    dtype = trunk_sd["x_embedder.weight"].dtype
    module = build_module(lambda: RadianceNetwork(trunk, head), sd, path, "Chroma Radiance transformer", dtype=dtype)
    module.nerf_image_embedder.float()  # ComfyUI's nerf_embedder_dtype: float32 whatever the model's
    return RadianceDiffusionModel(
        arch="chroma_radiance",
        module=module,
        latent_format=CHROMA_RADIANCE_LATENT,
        sampling={"kind": "flux", "shift": 1.15},
        config={"transformer": trunk, "head": head},
        dtype=dtype,
    )


from nodes.models.chroma_text import load_text_encoder  # noqa: E402

__all__ = ["is_radiance_state_dict", "load_diffusion_model", "load_text_encoder"]
