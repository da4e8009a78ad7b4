"""HunyuanVideo 1.5's 1080p latent upsampler as a ModelFn: a latent already resized to the target size in, the
refined latent out (nodes.models.hunyuan_video15_upsampler)."""

from __future__ import annotations

from typing import Any

import torch

from cluster.call import NoParams
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef


@register
class HunyuanVideo15UpsampleFn(ModelFn):
    name = "hunyuan_video15_latent_upsample"

    def setup_io(self) -> None:
        self.add_input("latent")
        self.add_output("latent")

    def load_model(self, ref: ModelRef) -> Any:
        from nodes.models.hunyuan_video15_upsampler import load_latent_upsampler
        from nodes.models.safetensors_io import load_state_dict

        path = ref.sources[0]
        return load_latent_upsampler(load_state_dict(path, ref.digests[0]), path)

    @torch.no_grad()
    def execute(self, model: Any, inputs: dict[str, Any], params: NoParams) -> dict[str, torch.Tensor]:
        device = next(model.parameters()).device
        return {"latent": model(inputs["latent"].to(device).float()).float()}
