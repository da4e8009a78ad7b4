"""`comfy.latent_formats`: the latent format classes packs read (scale_factor, shift_factor,
latent_channels, latent_rgb_factors) and call (process_in / process_out). The scaling is ours
(nodes.models.components), so a pack's process_in equals what our samplers feed the model; the RGB
factors are ComfyUI's published preview projections (per latent channel: R, G, B). ComfyUI's formats for
models we do not run (video, audio, 3D) import, and refuse when instantiated; those whose latents
are plain scaled images (SD x4 upscaler, Stable Cascade) work, for previews."""

from __future__ import annotations

from typing import Any

import torch

from comfy_bridge.packs.origin import UnsupportedFeature
from nodes.models import components

_SD15_RGB = ((0.3512, 0.2297, 0.3227), (0.325, 0.4974, 0.235), (-0.2829, 0.1762, 0.2721), (-0.212, -0.2616, -0.7177))
_SDXL_RGB = (
    (0.3651, 0.4232, 0.4341),
    (-0.2533, -0.0042, 0.1068),
    (0.1076, 0.1111, -0.0362),
    (-0.3165, -0.2492, -0.2188),
)
_PLAYGROUND_RGB = (
    (0.392, 0.4054, 0.4549),
    (-0.2634, -0.0196, 0.0653),
    (0.0568, 0.1687, -0.0755),
    (-0.3112, -0.2359, -0.2076),
)
_SD3_RGB = (
    (-0.0922, -0.0175, 0.0749),
    (0.0311, 0.0633, 0.0954),
    (0.1994, 0.0927, 0.0458),
    (0.0856, 0.0339, 0.0902),
    (0.0587, 0.0272, -0.0496),
    (-0.0006, 0.1104, 0.0309),
    (0.0978, 0.0306, 0.0427),
    (-0.0042, 0.1038, 0.1358),
    (-0.0194, 0.002, 0.0669),
    (-0.0488, 0.013, -0.0268),
    (0.0922, 0.0988, 0.0951),
    (-0.0278, 0.0524, -0.0542),
    (0.0332, 0.0456, 0.0895),
    (-0.0069, -0.003, -0.081),
    (-0.0596, -0.0465, -0.0293),
    (-0.1448, -0.1463, -0.1189),
)
_FLUX_RGB = (
    (-0.0346, 0.0244, 0.0681),
    (0.0034, 0.021, 0.0687),
    (0.0275, -0.0668, -0.0433),
    (-0.0174, 0.016, 0.0617),
    (0.0859, 0.0721, 0.0329),
    (0.0004, 0.0383, 0.0115),
    (0.0405, 0.0861, 0.0915),
    (-0.0236, -0.0185, -0.0259),
    (-0.0245, 0.025, 0.118),
    (0.1008, 0.0755, -0.0421),
    (-0.0515, 0.0201, 0.0011),
    (0.0428, -0.0012, -0.0036),
    (0.0817, 0.0765, 0.0749),
    (-0.1264, -0.0522, -0.1103),
    (-0.028, -0.0881, -0.0499),
    (-0.1262, -0.0982, -0.0778),
)


class LatentFormat:
    scale_factor = 1.0
    shift_factor = 0.0
    latent_channels = 4
    latent_dimensions = 2
    latent_rgb_factors: Any = None
    latent_rgb_factors_bias: Any = None
    taesd_decoder_name: str | None = None
    # Our format the scaling comes from; None: plain scale_factor (a pack's own subclass).
    ours: components.LatentFormat | None = None

    def process_in(self, latent: torch.Tensor) -> torch.Tensor:
        if self.ours is not None:
            return self.ours.process_in(latent)
        return (latent - self.shift_factor) * self.scale_factor

    def process_out(self, latent: torch.Tensor) -> torch.Tensor:
        if self.ours is not None:
            return self.ours.process_out(latent)
        return latent / self.scale_factor + self.shift_factor


def _from(ours: components.LatentFormat, rgb: Any = None, bias: Any = None, taesd: str | None = None) -> dict:
    return {
        "ours": ours,
        "scale_factor": ours.scale_factor,
        "shift_factor": ours.shift_factor,
        "latent_channels": ours.channels,
        "latent_rgb_factors": rgb,
        "latent_rgb_factors_bias": bias,
        "taesd_decoder_name": taesd,
    }


class SD15(LatentFormat):
    def __init__(self, scale_factor: float = components.SD1_LATENT.scale_factor) -> None:
        vars(self).update(_from(components.LatentFormat(4, scale_factor), _SD15_RGB, None, "taesd_decoder"))


class SDXL(LatentFormat):
    def __init__(self) -> None:
        vars(self).update(_from(components.SDXL_LATENT, _SDXL_RGB, (0.1084, -0.0175, -0.0011), "taesdxl_decoder"))


class SDXL_Playground_2_5(LatentFormat):
    def __init__(self) -> None:
        vars(self).update(_from(components.PLAYGROUND_2_5_LATENT, _PLAYGROUND_RGB, None, "taesdxl_decoder"))


class SD3(LatentFormat):
    latent_channels = 16

    def __init__(self) -> None:
        vars(self).update(_from(components.SD3_LATENT, _SD3_RGB, (0.2394, 0.2135, 0.1925), "taesd3_decoder"))


class Flux(SD3):
    def __init__(self) -> None:
        vars(self).update(_from(components.FLUX_LATENT, _FLUX_RGB, (-0.0329, -0.0718, -0.0851), "taef1_decoder"))


_CLASSES = {
    components.SD1_LATENT: SD15,
    components.SDXL_LATENT: SDXL,
    components.PLAYGROUND_2_5_LATENT: SDXL_Playground_2_5,
    components.SD3_LATENT: SD3,
    components.FLUX_LATENT: Flux,
}


def for_format(ours: components.LatentFormat) -> LatentFormat:
    """The ComfyUI class instance for one of our formats (what `model.model.latent_format` is to packs)."""
    if ours in _CLASSES:
        return _CLASSES[ours]()
    fmt = LatentFormat()
    vars(fmt).update(_from(ours))
    return fmt


# Formats of model families Comfy Cluster does not run but whose latents a pack can still preview or scale
# (Impact's PreviewBridgeLatent offers them): plain scale factors and ComfyUI's published RGB projections.
class SD_X4(LatentFormat):
    def __init__(self) -> None:
        self.scale_factor = 0.08333
        self.latent_rgb_factors = (
            (-0.234, -0.3863, -0.3257),
            (0.0994, 0.0885, -0.0908),
            (-0.2833, -0.2349, -0.3741),
            (0.2523, -0.0055, -0.1651),
        )


class SC_Prior(LatentFormat):
    latent_channels = 16

    def __init__(self) -> None:
        self.scale_factor = 1.0
        self.latent_rgb_factors = (
            (-0.0326, -0.0204, -0.0127),
            (-0.1592, -0.0427, 0.0216),
            (0.0873, 0.0638, -0.002),
            (-0.0602, 0.0442, 0.1304),
            (0.08, -0.0313, -0.1796),
            (-0.081, -0.0638, -0.1581),
            (0.1791, 0.118, 0.0967),
            (0.074, 0.1416, 0.0432),
            (-0.1745, -0.1888, -0.1373),
            (0.2412, 0.1577, 0.0928),
            (0.1908, 0.0998, 0.0682),
            (0.0209, 0.0365, -0.0092),
            (0.0448, -0.065, -0.1728),
            (-0.1658, -0.1045, -0.1308),
            (0.0542, 0.1545, 0.1325),
            (-0.0352, -0.1672, -0.2541),
        )


class SC_B(LatentFormat):
    def __init__(self) -> None:
        self.scale_factor = 1.0 / 0.43
        self.latent_rgb_factors = (
            (0.1121, 0.2006, 0.1023),
            (-0.2093, -0.0222, -0.0195),
            (-0.3087, -0.1535, 0.0366),
            (0.029, -0.1574, -0.4078),
        )


# ComfyUI's formats for model families Comfy Cluster does not run.
_NOT_RUN = (
    "StableAudio1",
    "Mochi",
    "LTXV",
    "HunyuanVideo",
    "Cosmos1CV8x8x8",
    "Wan21",
    "Wan22",
    "HunyuanImage21",
    "HunyuanImage21Refiner",
    "Hunyuan3Dv2",
    "Hunyuan3Dv2_1",
    "Hunyuan3Dv2mini",
    "ACEAudio",
    "ChromaRadiance",
)


def _not_run(name: str) -> type:
    def __init__(self: LatentFormat, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedFeature(f"comfy.latent_formats.{name}", "Comfy Cluster does not run this model family")

    return type(name, (LatentFormat,), {"__init__": __init__, "__module__": __name__})


# Module attributes, so `from comfy.latent_formats import Wan21` imports (and isinstance is stable).
globals().update({name: _not_run(name) for name in _NOT_RUN})
