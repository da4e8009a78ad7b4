"""Anima LLLite (kohya-ss' ControlNet-LLLite for Anima's DiT): a model patch (models/model_patches, ModelPatchLoader)
that AnimaLLLiteApply attaches with a control image (and, for the inpainting file, a mask).

Facts read from the newest ComfyUI (comfy/ldm/anima/lllite.py at 773ef1b3, comfy_extras/nodes_model_patch.py at
4f8cf3e2, comfy/ldm/cosmos/predict2.py at 523fba4d); nothing of its code is copied here. Published layout ("v2",
named keys; metadata `lllite.version` must be "2" when present):
- `lllite_conditioning1.*`: the control image encoder. conv1 4x4 stride 4 to half the width, conv2 3x3, conv3 4x4
  stride 4 to the full width, each followed by GroupNorm (8 groups, halved until they divide) and SiLU; then
  `resblocks.N` (GroupNorm-SiLU-conv3x3 twice, residual), an optional `aspp` (one branch per dilation of metadata
  `lllite.aspp_dilations`, default 1,2,4,8: 1x1 for 1, else 3x3 dilated; each conv-GroupNorm-SiLU; plus a global
  average branch upsampled bilinearly; concatenated, 1x1 conv-GroupNorm-SiLU), `proj` 1x1 to the embedding width,
  flattened to tokens and LayerNormed (`out_norm`). The input is RGB in [-1,1] at 8 pixels per latent cell, so a
  token is one 2x2 patch of the DiT; the inpainting file takes a 4th channel, the mask in [-1,1] (metadata
  `lllite.inpaint_masked_input` "true": the RGB is zeroed under the mask first).
- `lllite_dit_blocks_{i}_{target}.{down,mid,cond_to_film,up}` and `.depth_embed`, target one of self_attn_{q,k,v}_proj,
  cross_attn_q_proj, mlp_layer1: block i's input to that projection x becomes
  x + up(silu(film(mid([c, silu(down(x))]))) * strength, c = tokens + depth_embed, FiLM (1 + gamma, beta) from
  cond_to_film(c). In ComfyUI the DiT's attn1/attn2 patches and its mlp patch change those inputs (the normed
  tokens); here forward pre-hooks on the diffusers block's attn1.to_q/to_k/to_v, attn2.to_q and ff.net[0] do.
The patch acts only in steps whose sigma lies in (sigma_end, sigma_start]; the encoder runs once per step."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

KIND = "anima_lllite"
PREFIX = "lllite_dit_blocks_"
TARGET = re.compile(r"lllite_dit_blocks_(\d+)_(self_attn_[qkv]_proj|cross_attn_q_proj|mlp_layer1)$")
PIXELS_PER_CELL = 8  # the control image is sized to the latent (Wan 2.1 VAE: 8 pixels a cell)


def _group_norm(channels: int) -> nn.GroupNorm:
    groups = 8
    while groups > 1 and channels % groups:
        groups //= 2
    return nn.GroupNorm(groups, channels)


class LLLiteResBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm1 = _group_norm(channels)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm2 = _group_norm(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(F.silu(self.norm2(self.conv1(F.silu(self.norm1(x))))))


class Aspp(nn.Module):
    def __init__(self, channels: int, dilations: Sequence[int]) -> None:
        super().__init__()

        def conv_norm_silu(conv: nn.Module) -> nn.Sequential:
            return nn.Sequential(conv, _group_norm(channels), nn.SiLU())

        self.branches = nn.ModuleList(
            conv_norm_silu(
                nn.Conv2d(channels, channels, 1) if d == 1 else nn.Conv2d(channels, channels, 3, padding=d, dilation=d)
            )
            for d in dilations
        )
        self.global_conv = conv_norm_silu(nn.Conv2d(channels, channels, 1))
        self.proj = nn.Sequential(
            nn.Conv2d(channels * (len(dilations) + 1), channels, 1), _group_norm(channels), nn.SiLU()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = self.global_conv(x.mean(dim=(-2, -1), keepdim=True))
        pooled = F.interpolate(pooled, size=x.shape[-2:], mode="bilinear", align_corners=False)
        return self.proj(torch.cat([b(x) for b in self.branches] + [pooled], dim=1))


class ControlEncoder(nn.Module):
    """The control image [B,C,H,W] to tokens [B, H/16 * W/16, embedding width]."""

    def __init__(self, in_channels: int, width: int, emb: int, resblocks: int, dilations: Sequence[int]) -> None:
        super().__init__()
        half = width // 2
        self.conv1 = nn.Conv2d(in_channels, half, 4, stride=4)
        self.norm1 = _group_norm(half)
        self.conv2 = nn.Conv2d(half, half, 3, padding=1)
        self.norm2 = _group_norm(half)
        self.conv3 = nn.Conv2d(half, width, 4, stride=4)
        self.norm3 = _group_norm(width)
        self.resblocks = nn.ModuleList(LLLiteResBlock(width) for _ in range(resblocks))
        self.aspp = Aspp(width, dilations) if dilations else None
        self.proj = nn.Conv2d(width, emb, 1)
        self.out_norm = nn.LayerNorm(emb)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.silu(self.norm1(self.conv1(x)))
        x = F.silu(self.norm2(self.conv2(x)))
        x = F.silu(self.norm3(self.conv3(x)))
        for block in self.resblocks:
            x = block(x)
        if self.aspp is not None:
            x = self.aspp(x)
        return self.out_norm(self.proj(x).flatten(2).transpose(1, 2))


class Adapter(nn.Module):
    """One projection input's LLLite module: FiLM-conditioned bottleneck added to the tokens."""

    def __init__(self, dim: int, emb: int, mlp: int) -> None:
        super().__init__()
        self.down = nn.Linear(dim, mlp)
        self.mid = nn.Linear(mlp + emb, mlp)
        self.cond_to_film = nn.Linear(emb, 2 * mlp)
        self.up = nn.Linear(mlp, dim)
        self.depth_embed = nn.Parameter(torch.zeros(emb), requires_grad=False)

    def forward(self, x: torch.Tensor, tokens: torch.Tensor, strength: float) -> torch.Tensor:
        if x.shape[0] != tokens.shape[0]:  # a batch of latents for one control image
            if x.shape[0] % tokens.shape[0]:
                raise ValueError(
                    f"model_patch: the Anima LLLite control has a batch of {tokens.shape[0]}, the latent {x.shape[0]}"
                )
            tokens = tokens.repeat(x.shape[0] // tokens.shape[0], 1, 1)
        if x.shape[1] != tokens.shape[1]:
            raise ValueError(
                f"model_patch: the Anima LLLite control has {tokens.shape[1]} tokens, the latent {x.shape[1]}"
            )
        if x.shape[0] > 1:
            # a sample at a time: an element-wise op's vector loop (two AVX-512 vectors, 32 floats, an iteration)
            # leaves a sample's last values to a scalar tail whose rounding differs, unless its size is a multiple
            # of 32, so a batch would change a sample's bits (seen with the tiny file's 12-wide bottleneck)
            return torch.cat([self(*pair, strength) for pair in zip(x.split(1), tokens.split(1), strict=True)])
        c = tokens + self.depth_embed.to(tokens)
        gamma, beta = self.cond_to_film(c).chunk(2, dim=-1)
        hidden = self.mid(torch.cat([c, F.silu(self.down(x))], dim=-1))
        return x + self.up(F.silu(hidden * (1 + gamma) + beta)) * strength


class AnimaLLLite(nn.Module):
    def __init__(self, config: Mapping) -> None:
        super().__init__()
        self.cond_in_channels = config["in_channels"]
        self.inpaint_masked_input = config["masked_input"]
        self.lllite_conditioning1 = ControlEncoder(
            config["in_channels"], config["width"], config["emb"], config["resblocks"], config["dilations"]
        )
        for name, (dim, mlp) in config["modules"].items():
            self.add_module(name, Adapter(dim, config["emb"], mlp))
        self.targets = frozenset(config["modules"])

    def adapt(self, x: torch.Tensor, tokens: torch.Tensor, block: int, target: str, strength: float) -> torch.Tensor:
        name = f"{PREFIX}{block}_{target}"
        return self.get_submodule(name)(x, tokens, strength) if name in self.targets else x


def config_of(shapes: Mapping[str, tuple[int, ...]], metadata: Mapping[str, str]) -> dict:
    """The network's sizes from a published file's shapes and metadata; ValueError names what does not fit."""
    version = metadata.get("lllite.version", "2")
    if version != "2":
        raise ValueError(f"is an Anima LLLite file of version {version!r}; only version 2 (named keys) is supported")
    names = sorted({k.split(".", 1)[0] for k in shapes if k.startswith(PREFIX)})
    if not names:
        raise ValueError("is an Anima LLLite file without lllite_dit_blocks_* modules")
    enc = "lllite_conditioning1."
    emb = shapes[enc + "proj.weight"][0]
    modules = {}
    for name in names:
        if TARGET.fullmatch(name) is None:
            raise ValueError(f"has an Anima LLLite module of unknown target: {name}")
        mlp, dim = shapes[f"{name}.down.weight"]
        if shapes[f"{name}.cond_to_film.weight"][1] != emb:
            raise ValueError(f"has an Anima LLLite module {name} of another embedding width than {emb}")
        modules[name] = (dim, mlp)
    if len({dim for dim, _ in modules.values()}) != 1:
        raise ValueError("has Anima LLLite modules of different model widths")
    resblocks = {int(k.split(".")[2]) for k in shapes if k.startswith(enc + "resblocks.")}
    aspp = any(k.startswith(enc + "aspp.") for k in shapes)
    dilations = metadata.get("lllite.aspp_dilations", "1,2,4,8")
    return {
        "in_channels": shapes[enc + "conv1.weight"][1],
        "width": shapes[enc + "conv3.weight"][0],
        "emb": emb,
        "resblocks": max(resblocks) + 1 if resblocks else 0,
        "dilations": tuple(int(d) for d in dilations.split(",") if d.strip()) if aspp else (),
        "masked_input": metadata.get("lllite.inpaint_masked_input", "false").lower() == "true",
        "modules": modules,
    }


def build(sd: Mapping[str, torch.Tensor], metadata: Mapping[str, str], path: str | None = None) -> AnimaLLLite:
    """The network of a published file's tensors (float32, as ComfyUI computes it on a CPU)."""
    from .errors import ModelLoadError
    from .safetensors_io import build_module

    try:
        config = config_of({k: tuple(v.shape) for k, v in sd.items()}, metadata)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, str(e)) from None
    return build_module(lambda: AnimaLLLite(config), dict(sd), path, "Anima LLLite")


def control_input(
    image: torch.Tensor, mask: torch.Tensor | None, latent_hw: tuple[int, int], in_channels: int, masked_input: bool
) -> torch.Tensor:
    """The encoder's input (a file of `in_channels`) for a latent of `latent_hw` cells (as the DiT sees it, padded to
    whole patches): the
    IMAGE [B,H,W,3] resized bicubically with a centre crop to 8 pixels a cell, clamped, in [-1,1]; for a 4-channel
    file the MASK (nearest-exact, thresholded at 0.5; zeros when none) follows as a channel in [-1,1]."""
    from nodes.upscale import common_upscale

    h, w = latent_hw[0] * PIXELS_PER_CELL, latent_hw[1] * PIXELS_PER_CELL
    rgb = common_upscale(image[..., :3].movedim(-1, 1).float(), w, h, "bicubic", "center").clamp(0.0, 1.0)
    rgb = rgb * 2.0 - 1.0
    if in_channels != 4:
        return rgb
    if mask is None:
        mask = torch.zeros_like(image[..., 0])
    mask = mask.reshape(-1, 1, *mask.shape[-2:]) if mask.ndim in (2, 3) else mask
    if mask.ndim != 4 or mask.shape[1] != 1:
        raise ValueError(f"mask: expected a MASK [B,H,W], got shape {tuple(mask.shape)}")
    mask = common_upscale(mask.float(), w, h, "nearest-exact", "center")
    if mask.shape[0] != rgb.shape[0]:
        if rgb.shape[0] % mask.shape[0]:
            raise ValueError(f"mask: a batch of {mask.shape[0]} masks for a batch of {rgb.shape[0]} images")
        mask = mask.repeat(rgb.shape[0] // mask.shape[0], 1, 1, 1)
    mask = (mask >= 0.5).float()
    if masked_input:
        rgb = rgb * (mask < 0.5).float()
    return torch.cat([rgb, mask * 2.0 - 1.0], dim=1)


@dataclass(frozen=True)
class StepControl:
    """One applied LLLite in a denoise step: the network, its encoder input and strength, its sigma window."""

    net: AnimaLLLite
    control: torch.Tensor
    strength: float
    sigma_start: float
    sigma_end: float

    def active(self, sigma: float) -> bool:
        return self.strength != 0.0 and self.sigma_end < sigma <= self.sigma_start


# (the diffusers block's submodule whose input is patched, the file's target) per ComfyUI patch point
HOOKS = (
    ("attn1.to_q", "self_attn_q_proj"),
    ("attn1.to_k", "self_attn_k_proj"),
    ("attn1.to_v", "self_attn_v_proj"),
    ("attn2.to_q", "cross_attn_q_proj"),
    ("ff.net.0", "mlp_layer1"),
)


def _pre_hook(block: int, target: str, active: Sequence[tuple[AnimaLLLite, torch.Tensor, float]]) -> Callable:
    def hook(_module: nn.Module, args: tuple) -> tuple:
        x = args[0]
        for net, tokens, strength in active:  # in the order the nodes applied them, as ComfyUI's patch lists run
            x = net.adapt(x, tokens.to(x.dtype), block, target, strength)
        return (x, *args[1:])

    return hook


def with_controls(
    forward: Callable[[torch.Tensor], torch.Tensor], dit: nn.Module, controls: Sequence[StepControl], sigma: float
) -> Callable[[torch.Tensor], torch.Tensor]:
    """`forward` with the LLLites acting in the Cosmos DiT `dit`'s blocks during each call (those whose window
    holds `sigma`); the cached DiT is unchanged."""
    blocks = getattr(dit, "transformer_blocks", None)
    if blocks is None:
        raise ValueError("model_patch: an Anima LLLite patches Anima models only")
    chosen = [c for c in controls if c.active(sigma)]
    if not chosen:
        return forward

    def run(x: torch.Tensor) -> torch.Tensor:
        active = []
        with torch.no_grad():
            for c in chosen:
                c.net.to(x.device)
                active.append((c.net, c.net.lllite_conditioning1(c.control.to(x.device, torch.float32)), c.strength))
        with ExitStack() as stack:
            for i, block in enumerate(blocks):
                for path, target in HOOKS:
                    hook = _pre_hook(i, target, active)
                    stack.callback(block.get_submodule(path).register_forward_pre_hook(hook).remove)
            return forward(x)

    return run
