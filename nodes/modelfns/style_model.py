"""A style model's forward pass as a ModelFn: CLIP vision tokens in, conditioning tokens out."""

from __future__ import annotations

from typing import Any

import torch

from cluster.call import NoParams
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef
from nodes.models.style_model import StyleModel


@register
class StyleModelCondFn(ModelFn):
    """inputs: last_hidden_state [B,T,W] of a CLIP_VISION_OUTPUT; output: cond [B,N,D]."""

    name = "style_model_cond"

    def setup_io(self) -> None:
        self.add_input("last_hidden_state")
        self.add_output("cond")

    def load_model(self, ref: ModelRef) -> StyleModel:
        from nodes.models.safetensors_io import load_state_dict
        from nodes.models.style_model import load_style_model

        return load_style_model(load_state_dict(ref.sources[0], ref.digests[0]), ref.sources[0])

    def execute(self, model: StyleModel, inputs: dict[str, Any], params: NoParams) -> dict[str, torch.Tensor]:
        device = next(model.module.parameters()).device
        return {"cond": model.get_cond(inputs["last_hidden_state"].to(device))}
