"""Depth Anything 3's monocular inference as a ModelFn: a batch of images [B, H, W, 3] in, depth and sky (and a
confidence where the head has one) [B, H, W] out at the images' size (nodes/models/depth_anything3.py)."""

from __future__ import annotations

from typing import Any

import torch

from cluster.call import Params
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef
from nodes.models.depth_anything3 import DepthAnything3


class DA3Params(Params):
    resolution: int = 504
    resize_method: str = "upper_bound_resize"


@register
class DA3InferFn(ModelFn):
    """inputs: image [B,H,W,3] 0..1; outputs: depth [B,H,W], sky [B,H,W] (Mono/Metric files), confidence [B,H,W]
    (a head with a confidence channel)."""

    name = "da3_infer"
    Params = DA3Params

    def setup_io(self) -> None:
        self.add_input("image")
        for name in ("depth", "sky", "confidence"):
            self.add_output(name)

    def load_model(self, ref: ModelRef) -> DepthAnything3:
        from nodes.models.depth_anything3 import build_depth_anything3
        from nodes.models.safetensors_io import load_state_dict

        return build_depth_anything3(load_state_dict(ref.sources[0], ref.digests[0]))

    def execute(self, model: DepthAnything3, inputs: dict[str, Any], params: DA3Params) -> dict[str, torch.Tensor]:
        from nodes.models.depth_anything3 import infer

        return infer(model, inputs["image"][..., :3].float(), int(params.resolution), params.resize_method)
