"""The cascade discriminator as a ModelFn: scored like any other model call, so it is scheduled,
cached and charged to the tenant whose query it judges."""

from __future__ import annotations

from typing import Any

import torch

from cluster.call import NoParams
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef
from nodes.models.discriminator import Discriminator, load_discriminator


@register
class DiscriminatorScoreFn(ModelFn):
    name = "discriminator_score"

    def setup_io(self) -> None:
        self.add_input("image")
        self.add_output("confidence")

    def load_model(self, ref: ModelRef) -> Discriminator:
        return load_discriminator(ref.sources[0])

    def execute(self, model: Discriminator, inputs: dict[str, Any], params: NoParams) -> dict[str, torch.Tensor]:
        """IMAGE [B,H,W,3] -> confidence [B] = P(real)."""
        return {"confidence": model.confidence(inputs["image"])}
