"""`comfy.ldm.lightricks.vae.causal_conv3d`: LTX-Video's VAE convolution (this backend runs no LTX-Video VAE)."""

from __future__ import annotations

from comfy_bridge.compat.comfy.ldm.model_classes import UnsupportedModel


class CausalConv3d(UnsupportedModel):
    pass
