"""`comfy.ldm.lightricks.vae.causal_video_autoencoder`: LTX-Video's VAE classes, for subclassing and
isinstance checks (building one raises UnsupportedFeature: this backend runs no LTX-Video VAE)."""

from __future__ import annotations

from comfy_bridge.compat.comfy.ldm.model_classes import UnsupportedModel


class Encoder(UnsupportedModel):
    pass


class Decoder(UnsupportedModel):
    pass


class ResnetBlock3D(UnsupportedModel):
    pass


class VideoVAE(UnsupportedModel):
    pass
