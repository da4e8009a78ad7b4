"""`comfy.ldm.models.autoencoder`: the autoencoder class names (AutoencoderKL and its bases). They exist for
imports, subclassing and isinstance checks; building one raises UnsupportedFeature (see comfy.ldm.model_classes):
this backend's VAE is its own, reached through the VAE objects nodes return."""
from __future__ import annotations

from comfy_bridge.compat.comfy.ldm.model_classes import UnsupportedModel

__all__ = ["AbstractAutoencoder", "AutoencodingEngine", "AutoencodingEngineLegacy", "AutoencoderKL"]


class AbstractAutoencoder(UnsupportedModel):
    comfy_name = "comfy.ldm.models.autoencoder.AbstractAutoencoder"


class AutoencodingEngine(AbstractAutoencoder):
    comfy_name = "comfy.ldm.models.autoencoder.AutoencodingEngine"


class AutoencodingEngineLegacy(AutoencodingEngine):
    comfy_name = "comfy.ldm.models.autoencoder.AutoencodingEngineLegacy"


class AutoencoderKL(AutoencodingEngineLegacy):
    comfy_name = "comfy.ldm.models.autoencoder.AutoencoderKL"
