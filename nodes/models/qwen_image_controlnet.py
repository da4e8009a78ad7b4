"""Qwen-Image InstantX ControlNets (Union and Inpainting; Comfy-Org/Qwen-Image-InstantX-ControlNets), run as ComfyUI
(0.3.64 and newer: comfy/controlnet.py's load_controlnet_qwen_instantx) runs them:

- the file is diffusers' QwenImageControlNetModel layout (InstantX trained it with diffusers): Qwen-Image's
  transformer blocks without the output head, one `controlnet_blocks.N` projection per block and
  `controlnet_x_embedder` for the hint tokens. ComfyUI tells it by `controlnet_blocks.0.weight` with
  `transformer_blocks.0.img_mlp.net.0.proj.weight`; a 68-wide hint embedder is the inpainting one (the latent's
  64 patch features and 4 of the mask);
- the hint IMAGE is resized to the latent size * 8 (centre crop, nearest-exact), encoded by the VAE given to the
  apply node and normalised as Qwen-Image latents (Wan 2.1's format); the inpainting ControlNet's mask (ComfyUI's
  extra_concat: 1 where the image is kept) is resized to the latent's size the same way and joins it;
- block i's output, times the strength, is added to the image tokens after main block i, each ControlNet block's
  output standing for ceil(60 / blocks) consecutive main blocks: ComfyUI spreads them over the released model's 60
  blocks whatever the sampled model's depth."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from diffusers import QwenImageControlNetModel

from cluster.refs import ModelRef
from nodes.models.batch_invariant import make_batch_invariant
from nodes.models.components import WAN21_LATENT, VAEModel
from nodes.models.controlnet import resize_hint
from nodes.models.errors import ModelLoadError
from nodes.models.flux import pack, patched
from nodes.models.safetensors_io import build_module

MARKERS = ("controlnet_blocks.0.weight", "transformer_blocks.0.img_mlp.net.0.proj.weight")
MAIN_BLOCKS = 60  # ComfyUI's main_model_double: Qwen-Image's depth, fixed
PATCH_FEATURES = 64  # a 2x2 patch of the 16-channel latent
MASK_FEATURES = 4  # a 2x2 patch of the one-channel mask (the inpainting ControlNet)


@dataclass
class QwenControlOutput:
    """What Qwen-Image ControlNets add: a residual (or None) for the image tokens after each main block."""

    blocks: tuple[torch.Tensor | None, ...]

    def __add__(self, other: QwenControlOutput) -> QwenControlOutput:
        # ComfyUI's control_merge: chained ControlNets add up per block; a shorter list adds nothing past its end.
        n = max(len(self.blocks), len(other.blocks))
        a, b = (list(o.blocks) + [None] * (n - len(o.blocks)) for o in (self, other))
        return QwenControlOutput(tuple(x if y is None else y if x is None else x + y for x, y in zip(a, b)))

    def residuals(self, depth: int, tokens: int, dtype: torch.dtype) -> list[torch.Tensor]:
        """One residual per main block of a `depth`-block model over its `tokens` tokens: zeros where none, and
        over tokens past the image's (reference latents), as ComfyUI adds to the first tokens only."""
        first = next(r for r in self.blocks if r is not None)
        out = []
        for i in range(depth):
            r = self.blocks[i] if i < len(self.blocks) else None
            full = torch.zeros(first.shape[0], tokens, first.shape[-1], dtype=dtype, device=first.device)
            if r is not None:
                full[:, : r.shape[1]] = r
            out.append(full)
        return out


@dataclass
class QwenImageControlNet:
    arch: str
    module: torch.nn.Module
    vae: VAEModel
    config: dict[str, Any] = field(default_factory=dict)
    dtype: torch.dtype = torch.float32
    _hint_cache: tuple | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        make_batch_invariant(self.module)  # it runs inside batched denoising steps too

    @property
    def takes_mask(self) -> bool:
        return self.config["extra_condition_channels"] == MASK_FEATURES

    def latent_hint(
        self, hint: torch.Tensor, height: int, width: int, extra: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The hint as the ControlNet reads it for a height x width latent: [B,16(+1),h,w]. The last one is kept:
        hint, mask and latent size stay the same over a sampling run."""
        cached = self._hint_cache
        if (
            cached is not None
            and cached[1] == (height, width)
            and torch.equal(cached[0], hint)
            and (cached[3] is None if extra is None else cached[3] is not None and torch.equal(cached[3], extra))
        ):
            return cached[2]
        if self.takes_mask != (extra is not None):
            raise ValueError(
                "this Qwen-Image ControlNet takes an image and a mask: apply it with ControlNetInpaintingAliMamaApply"
                if self.takes_mask
                else "this Qwen-Image ControlNet takes no mask: apply it with Apply ControlNet"
            )
        d = self.vae.downscale
        pixels = resize_hint(hint, height * d, width * d).movedim(1, -1)
        latent = WAN21_LATENT.process_in(self.vae.encode(pixels))
        if extra is not None:  # ComfyUI's extra_concat: resized as the hint is, repeated to its batch
            mask = resize_hint(extra.movedim(1, -1), height, width).to(latent)
            if mask.shape[0] != latent.shape[0]:
                mask = mask.repeat(math.ceil(latent.shape[0] / mask.shape[0]), 1, 1, 1)[: latent.shape[0]]
            latent = torch.cat([latent, mask], dim=1)
        self._hint_cache = (hint, (height, width), latent, extra)
        return latent

    @torch.no_grad()
    def apply(
        self,
        x: torch.Tensor,
        timestep: torch.Tensor,
        cond: dict[str, Any],
        hint: torch.Tensor,
        strength: float = 1.0,
        extra: torch.Tensor | None = None,
    ) -> QwenControlOutput:
        """Residuals for model input `x` ([B,16,H,W] or [B,16,1,H,W]) at `timestep` (sigma) for the hint IMAGE and
        the inpainting one's mask `extra` ([B,1,H,W]); `cond` holds "context". They are already multiplied by
        `strength`."""
        x = x[:, :, 0] if x.dim() == 5 else x
        b, _, h, w = x.shape
        latent = self.latent_hint(hint, h, w, extra).to(x.device)
        if latent.shape[0] != b:
            if b % latent.shape[0]:
                raise ValueError(f"a batch of {latent.shape[0]} hints cannot match a latent batch of {b}")
            latent = latent.repeat(b // latent.shape[0], 1, 1, 1)
        x = patched(x)
        h_len, w_len = x.shape[-2] // 2, x.shape[-1] // 2
        context = cond["context"]
        t = torch.as_tensor(timestep, dtype=torch.float32, device=x.device).reshape(-1)
        samples = self.module(
            hidden_states=pack(x.to(self.dtype)),
            controlnet_cond=pack(patched(latent).to(self.dtype)),
            conditioning_scale=float(strength),
            encoder_hidden_states=(context.expand(b, *context.shape[1:]) if context.shape[0] == 1 else context).to(
                x.device, self.dtype
            ),
            timestep=t.expand(b) if t.numel() == 1 else t,
            img_shapes=[[(0, h_len, w_len, 0, 0)]] * b,
            return_dict=False,
        )
        repeat = math.ceil(MAIN_BLOCKS / len(samples))
        return QwenControlOutput(tuple(s.float() for s in samples for _ in range(repeat))[:MAIN_BLOCKS])


def is_instantx(shapes: Mapping[str, Any]) -> bool:
    return all(k in shapes for k in MARKERS)


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """QwenImageControlNetModel's config from the file's shapes (Qwen-Image's rules: 128-wide heads)."""
    from nodes.models.flux_keys import count_blocks
    from nodes.models.qwen_image import PATCH, ROPE_AXES

    inner, in_channels = sd["img_in.weight"].shape
    head_dim = int(sd["transformer_blocks.0.attn.norm_q.weight"].shape[0])
    if inner % head_dim or head_dim != sum(ROPE_AXES):
        raise ValueError(f"width {inner} with {head_dim}-wide heads: Qwen-Image's rotary positions need 128")
    extra = int(sd["controlnet_x_embedder.weight"].shape[1]) - int(in_channels)
    if extra not in (0, MASK_FEATURES):
        raise ValueError(f"its hint embedder takes {extra} features besides the latent's; only 0 or 4 are known")
    return {
        "patch_size": PATCH,
        "in_channels": int(in_channels),
        "out_channels": int(in_channels) // (PATCH * PATCH),
        "num_layers": count_blocks(sd, "transformer_blocks"),
        "attention_head_dim": head_dim,
        "num_attention_heads": int(inner // head_dim),
        "joint_attention_dim": int(sd["txt_in.weight"].shape[1]),
        "axes_dims_rope": ROPE_AXES,
        "extra_condition_channels": extra,
    }


def load_controlnet(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> QwenImageControlNet:
    """An InstantX Qwen-Image ControlNet (or a Fun ControlNet Union, nodes.models.qwen_image_fun_controlnet); the VAE
    that encodes its hints comes as the ref's "vae" option (the apply node's vae input), which ComfyUI also requires
    of it."""
    from nodes.models import qwen_image_fun_controlnet
    from nodes.models.loader import load_vae

    if qwen_image_fun_controlnet.is_fun(state_dict):
        return qwen_image_fun_controlnet.load_controlnet(ref, state_dict)
    from nodes.models.qwen_image import ComfyRotaryPositions

    path = ref.sources[0] if ref.sources else None
    vae_ref = ref.option("vae")
    if vae_ref is None:
        raise ModelLoadError(
            path, "this Qwen-Image ControlNet needs a VAE: apply it with a node that has a vae input (Apply ControlNet)"
        )
    try:
        config = infer_config(state_dict)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Qwen-Image InstantX ControlNet: {e}") from None
    module = build_module(
        lambda: QwenImageControlNetModel(**config), dict(state_dict), path, "Qwen-Image ControlNet", dtype=torch.float32
    )
    module.pos_embed = ComfyRotaryPositions(config["axes_dims_rope"])  # ComfyUI's positions, as the main model's
    return QwenImageControlNet(arch="qwen_image", module=module, vae=load_vae(vae_ref), config=config)
