"""LTX-2's latent upsampler as a ModelFn: a normalised video latent and the VAE's per-channel statistics in, the
upsampled latent (normalised the same way) out (nodes.models.ltx2_upsampler)."""

from __future__ import annotations

from typing import Any

import torch

from cluster.call import NoParams
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef


@register
class LatentUpsampleFn(ModelFn):
    name = "ltx2_latent_upsample"

    def setup_io(self) -> None:
        self.add_input("latent")
        self.add_input("mean")
        self.add_input("std")
        self.add_output("latent")

    def load_model(self, ref: ModelRef) -> Any:
        from nodes.models.ltx2 import file_metadata
        from nodes.models.ltx2_upsampler import load_latent_upsampler
        from nodes.models.safetensors_io import load_state_dict

        path = ref.sources[0]
        return load_latent_upsampler(load_state_dict(path, ref.digests[0]), file_metadata(path), path)

    @torch.no_grad()
    def execute(self, model: Any, inputs: dict[str, Any], params: NoParams) -> dict[str, torch.Tensor]:
        device = next(model.parameters()).device
        latent = inputs["latent"].to(device)
        return {"latent": model(latent, inputs["mean"].to(device), inputs["std"].to(device))}
