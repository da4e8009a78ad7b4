"""The upscale model's forward pass as a ModelFn: IMAGE in, upscaled IMAGE out, tiled on the executor
the way ComfyUI's ImageUpscaleWithModel tiles (512-pixel tiles, 32 overlap, halved on out-of-memory)."""

from __future__ import annotations

from typing import Any

import torch

from cluster.call import Params
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef
from nodes.models.esrgan import UpscaleModel, tiled_scale

TILE, OVERLAP, MIN_TILE = 512, 32, 128


class UpscaleParams(Params):
    tile: int = TILE  # pixels per tile (ComfyUI's 512); halved while a tile does not fit in memory


@register
class UpscaleImageFn(ModelFn):
    """inputs: image [B,H,W,C] 0..1; params: an UpscaleParams."""

    name = "upscale_image"
    Params = UpscaleParams

    def setup_io(self) -> None:
        self.add_input("image")
        self.add_output("image")

    def load_model(self, ref: ModelRef) -> UpscaleModel:
        from nodes.models.esrgan import load_upscale_model
        from nodes.models.safetensors_io import load_state_dict

        return load_upscale_model(load_state_dict(ref.sources[0], ref.digests[0]), ref.sources[0])

    def execute(self, model: UpscaleModel, inputs: dict[str, Any], params: UpscaleParams) -> dict[str, torch.Tensor]:
        image = inputs["image"].movedim(-1, -3)
        device = next(model.module.parameters()).device
        tile = params.tile
        while True:
            try:
                out = tiled_scale(image.to(device), model, tile, OVERLAP, model.scale, model.module.cfg.out_nc)
                break
            except torch.OutOfMemoryError:
                tile //= 2
                if tile < MIN_TILE:
                    raise
        return {"image": torch.clamp(out.movedim(-3, -1), min=0, max=1.0)}
