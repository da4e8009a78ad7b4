"""ControlNets (ldm `control_model.*` and diffusers layouts) and the residuals they add to the UNet."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.nn.functional as F

from .batch_invariant import make_batch_invariant
from .errors import ModelLoadError
from .unet import UNetLayout, _batch, block_map, diffusers_config, sdxl_time_ids

LATENT_DOWNSCALE = 8
_CN_KEYS = (
    "in_channels",
    "block_out_channels",
    "down_block_types",
    "mid_block_type",
    "cross_attention_dim",
    "attention_head_dim",
    "use_linear_projection",
    "transformer_layers_per_block",
    "norm_num_groups",
    "addition_embed_type",
    "addition_time_embed_dim",
    "projection_class_embeddings_input_dim",
)


@dataclass
class ControlResiduals:
    """What a ControlNet adds to the UNet: one residual per skip connection and one for the middle block."""

    down: tuple[torch.Tensor, ...]
    mid: torch.Tensor

    def __add__(self, other: ControlResiduals) -> ControlResiduals:
        if len(self.down) != len(other.down):
            raise ValueError("cannot chain ControlNets with different numbers of residuals")
        return ControlResiduals(tuple(a + b for a, b in zip(self.down, other.down)), self.mid + other.mid)


def hint_channels(shapes: dict[str, Any], prefix: str) -> list[int]:
    """The hint encoder widths: conv_in's output, then the output of every strided conv."""
    convs = sorted(
        int(k[len(prefix) + len("input_hint_block.") :].split(".")[0])
        for k in shapes
        if k.startswith(prefix + "input_hint_block.") and k.endswith(".weight")
    )
    widths = [tuple(shapes[f"{prefix}input_hint_block.{i}.weight"]) for i in convs]
    return [widths[0][0]] + [w[0] for w in widths[2:-1:2]]


def config(layout: UNetLayout, arch: str, cond_channels: list[int], hint_in: int, path: str | None) -> dict[str, Any]:
    """ControlNetModel config: the UNet encoder's config plus the hint encoder."""
    levels = {len(d) for d in layout.down_depths}
    if len(levels) != 1:
        raise ModelLoadError(path, "unsupported ControlNet: levels have different numbers of resnets")
    # Borrow the UNet config logic by giving the layout a matching (unused) decoder.
    as_unet = replace(layout, up_depths=[d + d[:1] for d in layout.down_depths])
    cfg = {k: v for k, v in diffusers_config(as_unet, arch, path).items() if k in _CN_KEYS}
    cfg.update(
        layers_per_block=levels.pop(),
        conditioning_embedding_out_channels=tuple(cond_channels),
        conditioning_channels=hint_in,
    )
    return cfg


def ldm_map(layout: UNetLayout, n_hint: int) -> dict[str, tuple[str, bool]]:
    """ldm ControlNet block prefix -> (diffusers prefix, is_resnet)."""
    m = {k: v for k, v in block_map(layout).items() if not k.startswith(("out.", "output_blocks."))}
    zero = 1 + sum(len(d) for d in layout.down_depths) + layout.levels - 1
    for k in range(zero):
        m[f"zero_convs.{k}.0."] = (f"controlnet_down_blocks.{k}.", False)
    m["middle_block_out.0."] = ("controlnet_mid_block.", False)
    m["input_hint_block.0."] = ("controlnet_cond_embedding.conv_in.", False)
    for b in range(n_hint - 2):
        m[f"input_hint_block.{2 + 2 * b}."] = (f"controlnet_cond_embedding.blocks.{b}.", False)
    m[f"input_hint_block.{2 * n_hint - 2}."] = ("controlnet_cond_embedding.conv_out.", False)
    return m


def resize_hint(hint: torch.Tensor, height: int, width: int, mode: str = "nearest-exact") -> torch.Tensor:
    """IMAGE [B,H,W,C] -> [B,C,height,width]: centre crop to the target aspect, then `mode` (nearest-exact for
    ControlNet hints), as ComfyUI's common_upscale(..., mode, "center") does."""
    if hint.dim() != 4 or hint.shape[1] == 0 or hint.shape[2] == 0:
        raise ValueError(f"a ControlNet hint must be an IMAGE [B,H,W,C] with pixels; got shape {tuple(hint.shape)}")
    x = hint.movedim(-1, 1).float()
    h, w = x.shape[-2:]
    old, new = w / h, width / height
    dx = round((w - w * (new / old)) / 2) if old > new else 0
    dy = round((h - h * (old / new)) / 2) if old < new else 0
    x = x[:, :, dy : h - dy, dx : w - dx]
    if x.shape[-1] == 0 or x.shape[-2] == 0:
        raise ValueError(f"the ControlNet hint {w}x{h} is too thin to crop to the {width}x{height} image")
    return F.interpolate(x, size=(height, width), mode=mode)


@dataclass
class ControlNet:
    """A loaded ControlNet behind ComfyUI's conventions (hint IMAGE resized to latent * 8)."""

    arch: str
    module: torch.nn.Module
    config: dict[str, Any] = field(default_factory=dict)
    dtype: torch.dtype = torch.float32

    def __post_init__(self) -> None:
        make_batch_invariant(self.module)  # it runs inside batched denoising steps too

    @property
    def hint_downscale(self) -> int:
        return 2 ** (len(self.config["conditioning_embedding_out_channels"]) - 1)

    @torch.no_grad()
    def apply(
        self,
        x: torch.Tensor,
        timestep: torch.Tensor,
        cond: dict[str, Any] | torch.Tensor,
        hint: torch.Tensor,
        strength: float = 1.0,
    ) -> ControlResiduals:
        """Residuals for model input `x` (calculate_input-scaled) at `timestep`; `cond` holds "context" and,
        for SDXL, "pooled" and "time_ids". The residuals are already multiplied by `strength`."""
        if isinstance(cond, torch.Tensor):
            cond = {"context": cond}
        b, _, h, w = x.shape
        channels = self.config.get("conditioning_channels", 3)
        if hint.dim() == 4 and hint.shape[-1] != channels:
            raise ValueError(f"the ControlNet hint has {hint.shape[-1]} channels, this ControlNet takes {channels}")
        if self.hint_downscale != LATENT_DOWNSCALE:
            raise ValueError(
                f"this ControlNet's hint encoder downsamples {self.hint_downscale}x, so its hint "
                f"cannot match a latent of the {LATENT_DOWNSCALE}x VAE"
            )
        cond_img = resize_hint(hint, h * LATENT_DOWNSCALE, w * LATENT_DOWNSCALE)
        if cond_img.shape[0] != b:
            if b % cond_img.shape[0]:
                raise ValueError(f"a batch of {cond_img.shape[0]} hints cannot match a latent batch of {b}")
            cond_img = cond_img.repeat(b // cond_img.shape[0], 1, 1, 1)
        t = timestep.reshape(-1).to(self.dtype)
        t = t.expand(b) if t.numel() == 1 else t
        added = None
        if self.arch == "sdxl":
            added = {
                "text_embeds": _batch(cond["pooled"], b).to(self.dtype),
                "time_ids": _batch(sdxl_time_ids(x, cond.get("time_ids")), b).to(self.dtype),
            }
        context = _batch(cond["context"], b).to(self.dtype)
        down, mid = self.run(x.to(self.dtype), t, context, cond_img.to(self.dtype), float(strength), added)
        return ControlResiduals(tuple(r.float() for r in down), mid.float())

    def run(
        self,
        x: torch.Tensor,
        t: torch.Tensor,
        context: torch.Tensor,
        cond_img: torch.Tensor,
        strength: float,
        added: dict[str, torch.Tensor] | None,
    ) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        """The network's residuals (times `strength`) for a hint already at the image size."""
        return self.module(
            x,
            t,
            encoder_hidden_states=context,
            controlnet_cond=cond_img,
            conditioning_scale=strength,
            added_cond_kwargs=added,
            return_dict=False,
        )
