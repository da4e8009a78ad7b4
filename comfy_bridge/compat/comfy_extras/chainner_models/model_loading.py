"""`comfy_extras.chainner_models.model_loading.load_state_dict`: an upscale model from a state dict, run
in the pack's process (packs move it to a device and call it on [B,C,H,W] images in 0..1, tiling with
comfy.utils.tiled_scale by its `scale`). The architectures are the core UpscaleModelLoader's (ESRGAN /
Real-ESRGAN / BSRGAN RRDBNet, in any of their key layouts); others raise an error naming what is
supported. The value is an in-process module, not an UPSCALE_MODEL the core nodes take."""

from __future__ import annotations

import logging
from typing import Any

import torch

from nodes.models.esrgan import UpscaleModel, load_upscale_model

log = logging.getLogger(__name__)


class ImageModelDescriptor:
    """spandrel's descriptor surface: `model` (the torch module), `scale`, `input_channels`,
    `output_channels`, `architecture`, `eval()` / `to()` / `cpu()` returning itself, and calling it upscales."""

    def __init__(self, loaded: UpscaleModel):
        self.loaded = loaded
        self.model = loaded.module
        cfg = loaded.module.cfg
        self.scale = loaded.scale
        self.input_channels = cfg.in_nc // (cfg.shuffle**2 if cfg.shuffle else 1)
        self.output_channels = cfg.out_nc
        self.architecture = "ESRGAN"
        self.size_requirements = {"multiple_of": cfg.multiple_of}

    def eval(self) -> ImageModelDescriptor:
        self.model.eval()
        return self

    def train(self, mode: bool = True) -> ImageModelDescriptor:
        self.model.train(mode)
        return self

    def to(self, *args: Any, **kwargs: Any) -> ImageModelDescriptor:
        self.model.to(*args, **kwargs)
        return self

    def cpu(self) -> ImageModelDescriptor:
        return self.to("cpu")

    def cuda(self) -> ImageModelDescriptor:
        return self.to("cuda")

    def half(self) -> ImageModelDescriptor:
        self.model.half()
        return self

    def float(self) -> ImageModelDescriptor:
        self.model.float()
        return self

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.loaded(image.to(self.dtype))


def load_state_dict(state_dict: dict[str, torch.Tensor]) -> ImageModelDescriptor:
    log.warning("comfy_extras.chainner_models is deprecated (ComfyUI replaced it by spandrel).")
    return ImageModelDescriptor(load_upscale_model(state_dict)).eval()
