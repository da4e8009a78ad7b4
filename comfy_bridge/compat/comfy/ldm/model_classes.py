"""The base of ComfyUI's model classes that packs subclass or isinstance-check (UNetModel, Flux, ControlNet,
AutoencoderKL, ...). The names exist so those imports, subclasses and checks work; building one raises
UnsupportedFeature, because this backend runs its models in its own engine: a pack cannot construct or
rebuild ComfyUI's in-process model objects here."""

from __future__ import annotations

from typing import Any

from torch import nn

from comfy_bridge.packs.origin import UnsupportedFeature

WHY = (
    "Comfy Cluster runs models in its own engine and has no ComfyUI in-process model objects for a pack to "
    "build, rebuild or patch"
)


COMPAT_PREFIX = "comfy_bridge.compat."


class UnsupportedModel(nn.Module):
    """nn.Module whose construction raises UnsupportedFeature naming the ComfyUI class (`comfy_name`).

    A subclass defined in our compat modules gets its ComfyUI name from where it lives
    (comfy_bridge.compat.comfy.ldm.flux.layers.SelfAttention -> "comfy.ldm.flux.layers.SelfAttention"); a
    pack's subclass keeps its base's name, and the message adds the subclass."""

    comfy_name = "comfy.ldm model class"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__module__.startswith(COMPAT_PREFIX) and "comfy_name" not in cls.__dict__:
            cls.comfy_name = f"{cls.__module__.removeprefix(COMPAT_PREFIX)}.{cls.__qualname__}"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedFeature(
            type(self).comfy_name
            if type(self).__dict__.get("comfy_name")
            else f"{type(self).comfy_name} (subclass {type(self).__qualname__})",
            WHY,
        )
