"""SD3 ControlNets in diffusers' layout (the InstantX / Stability SD3 ControlNets ComfyUI loads as "SD3 diffusers
controlnet"), run as ComfyUI runs them:

- the hint IMAGE is resized to the latent size * 8 (centre crop, nearest-exact), encoded by the VAE given to the
  apply node and scaled by SD3's latent scale without its shift (ComfyUI's "SD3 controlnet weirdness");
- the network is diffusers' SD3ControlNetModel with the pooled vector zeroed (as ComfyUI's ControlNet does);
- each ControlNet block's output is repeated depth // blocks times (once less for the last) into one residual
  per MMDiT joint block, which the MMDiT adds to the image tokens after that block.
Inpainting ControlNets (17 hint channels) and Stability's SD3.5 ControlNet layout are refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from diffusers import SD3ControlNetModel

from cluster.refs import ModelRef
from nodes.models.batch_invariant import make_batch_invariant
from nodes.models.components import SD3_LATENT, VAEModel
from nodes.models.controlnet import resize_hint
from nodes.models.errors import ModelLoadError
from nodes.models.safetensors_io import build_module
from nodes.models.sd3 import infer_config

MARKERS = ("controlnet_blocks.0.weight", "pos_embed_input.proj.weight")


@dataclass
class SD3ControlOutput:
    """What SD3 ControlNets add to the MMDiT: a residual (or None) per joint block, in block order."""

    blocks: tuple[torch.Tensor | None, ...]

    def __add__(self, other: SD3ControlOutput) -> SD3ControlOutput:
        # ComfyUI's control_merge: chained ControlNets add up per block; a shorter list adds nothing past its end.
        n = max(len(self.blocks), len(other.blocks))
        a, b = (list(o.blocks) + [None] * (n - len(o.blocks)) for o in (self, other))
        return SD3ControlOutput(tuple(x if y is None else y if x is None else x + y for x, y in zip(a, b)))


@dataclass
class SD3ControlNet:
    arch: str
    module: torch.nn.Module
    vae: VAEModel
    config: dict[str, Any] = field(default_factory=dict)
    dtype: torch.dtype = torch.float32
    _hint_cache: tuple | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        make_batch_invariant(self.module)  # it runs inside batched denoising steps too

    def latent_hint(self, hint: torch.Tensor, height: int, width: int) -> torch.Tensor:
        """The hint as the ControlNet sees it, for a latent of height x width (the last one is kept: the hint
        and the latent size stay the same over a sampling run)."""
        cached = self._hint_cache
        if cached is not None and cached[1] == (height, width) and torch.equal(cached[0], hint):
            return cached[2]
        pixels = resize_hint(hint, height * self.vae.downscale, width * self.vae.downscale).movedim(1, -1)
        latent = self.vae.encode(pixels) * SD3_LATENT.scale_factor
        self._hint_cache = (hint, (height, width), latent)
        return latent

    @torch.no_grad()
    def apply(
        self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any], hint: torch.Tensor, strength: float = 1.0
    ) -> SD3ControlOutput:
        """Residuals for model input `x` (calculate_input-scaled) at `timestep` for the hint IMAGE; `cond`
        holds "context". The residuals are already multiplied by `strength`."""
        return self.run(x, timestep, cond, self.latent_hint(hint, *x.shape[-2:]), strength)

    @torch.no_grad()
    def run(
        self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any], latent: torch.Tensor, strength: float = 1.0
    ) -> SD3ControlOutput:
        """`apply` with the hint already in latent form (latent_hint's)."""
        module: SD3ControlNetModel = self.module
        b, _, h, w = x.shape
        latent = latent.to(x.device)
        if latent.shape[0] != b:
            if b % latent.shape[0]:
                raise ValueError(f"a batch of {latent.shape[0]} hints cannot match a latent batch of {b}")
            latent = latent.repeat(b // latent.shape[0], 1, 1, 1)
        p = module.config.patch_size
        pad = (0, (-w) % p, 0, (-h) % p)  # ComfyUI's patch embeddings pad circularly to whole patches
        t = timestep.reshape(-1).to(torch.float32)
        context = cond["context"]
        samples = module(
            hidden_states=F.pad(x, pad, mode="circular").to(self.dtype),
            controlnet_cond=F.pad(latent, pad, mode="circular").to(self.dtype),
            conditioning_scale=float(strength),
            encoder_hidden_states=(context.expand(b, *context.shape[1:]) if context.shape[0] == 1 else context).to(
                self.dtype
            ),
            pooled_projections=torch.zeros(b, module.config.pooled_projection_dim, dtype=self.dtype, device=x.device),
            timestep=t.expand(b) if t.numel() == 1 else t,
            return_dict=False,
        )[0]
        count = module.config.num_attention_heads // len(samples)  # ComfyUI: depth // blocks
        out: list[torch.Tensor] = []
        for i, s in enumerate(samples):
            out += [s.float()] * (count - (i == len(samples) - 1))
        return SD3ControlOutput(tuple(out))


def load_controlnet(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> SD3ControlNet:
    """An SD3 ControlNet from a diffusers-layout file; the VAE that encodes its hints comes as the ref's
    "vae" option (ControlNetApplySD3's vae input)."""
    from nodes.models.loader import load_vae

    path = ref.sources[0] if ref.sources else None
    if "transformer_blocks.0.adaLN_modulation.1.bias" in state_dict:
        raise ModelLoadError(path, "Stability's SD3.5 ControlNets are not supported yet")
    vae_ref = ref.option("vae")
    if vae_ref is None:
        raise ModelLoadError(
            path, "this ControlNet needs a VAE: apply it with a node that has a vae input (Apply Controlnet with VAE)"
        )
    sd = dict(state_dict)
    try:
        config = infer_config(sd)
        hint_channels = sd["pos_embed_input.proj.weight"].shape[1]
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable SD3 ControlNet: {e}") from None
    if hint_channels != config["in_channels"]:
        raise ModelLoadError(
            path, f"SD3 ControlNets with {hint_channels}-channel hints (inpainting) are not supported yet"
        )
    dtype = sd["pos_embed.proj.weight"].dtype
    module = build_module(lambda: SD3ControlNetModel(**config), sd, path, "SD3 ControlNet", dtype=dtype)
    return SD3ControlNet(arch="sd3", module=module, vae=load_vae(vae_ref), config=config, dtype=dtype)
