"""`comfy.ldm.models.autoencoder`: the autoencoder class names (AutoencoderKL and its bases). They exist for
imports, subclassing and isinstance checks; building one raises UnsupportedFeature (see comfy.ldm.model_classes):
this backend's VAE is its own, reached through the VAE objects nodes return."""

from __future__ import annotations

from comfy_bridge.compat.comfy.ldm.model_classes import UnsupportedModel

__all__ = ["AbstractAutoencoder", "AutoencodingEngine", "AutoencodingEngineLegacy", "AutoencoderKL"]


class AbstractAutoencoder(UnsupportedModel):
    """The base of ComfyUI's autoencoders."""


class AutoencodingEngine(AbstractAutoencoder):
    """An encoder, decoder and regularizer (the KL posterior for AutoencoderKL)."""


class AutoencodingEngineLegacy(AutoencodingEngine):
    """AutoencodingEngine built from the LDM ddconfig, with the quant convs."""


class AutoencoderKL(AutoencodingEngineLegacy):
    """The KL VAE of SD-family checkpoints."""
