"""Frame interpolation (FILM or RIFE, nodes/models/frame_interpolation.py) as a ModelFn: frames [T, H, W, C] in,
[(T-1)*multiplier+1, H, W, 3] out, the whole clip in one call (each new frame needs its two neighbours)."""

from __future__ import annotations

from typing import Any

import torch

from cluster.call import Params
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef


class FrameInterpolationParams(Params):
    multiplier: int = 2  # output frames per input frame pair (the new ones: multiplier - 1)


@register
class FrameInterpolateFn(ModelFn):
    """inputs: images [T,H,W,C] 0..1; params: a FrameInterpolationParams."""

    name = "frame_interpolate"
    Params = FrameInterpolationParams

    def setup_io(self) -> None:
        self.add_input("images")
        self.add_output("images")

    def load_model(self, ref: ModelRef) -> torch.nn.Module:
        from nodes.models.frame_interpolation import build
        from nodes.models.safetensors_io import load_state_dict

        return build(load_state_dict(ref.sources[0], ref.digests[0]))

    def execute(self, model, inputs: dict[str, Any], params: FrameInterpolationParams) -> dict[str, torch.Tensor]:
        from nodes.models.frame_interpolation import interpolate

        return {"images": interpolate(model, inputs["images"].float(), int(params.multiplier))}
