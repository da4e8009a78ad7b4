"""`comfy.sample`: the noise and latent helpers packs call; sampling itself goes through
nodes.common_ksampler (denoise steps on the cluster)."""
from __future__ import annotations

from typing import Any

import numpy as np  # noqa: F401  (ComfyUI's comfy.sample imports numpy as np; packs read comfy.sample.np)

from comfy_bridge.packs.origin import UnsupportedFeature
from comfy_bridge.compat.comfy.sampler_helpers import cleanup_additional_models  # noqa: F401  (deprecated there)
from nodes.ksampler import fix_empty_latent_channels
from nodes.sampling.noise import prepare_noise


def sample(*args: Any, **kwargs: Any) -> Any:
    raise UnsupportedFeature("comfy.sample.sample", "use nodes.common_ksampler")


def sample_custom(*args: Any, **kwargs: Any) -> Any:
    raise UnsupportedFeature("comfy.sample.sample_custom", "use nodes.common_ksampler")


__all__ = ["prepare_noise", "fix_empty_latent_channels", "sample", "sample_custom", "cleanup_additional_models"]
