"""MoGe-2's inference as a ModelFn: a batch of images [B, H, W, 3] in, its geometry out (points, depth, intrinsics,
mask, normals), post-processed on the executor as ComfyUI's MoGeModel.infer does (nodes/models/moge.py)."""

from __future__ import annotations

from typing import Any

import torch

from cluster.call import Params
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef
from nodes.models.moge import MoGe2


class MoGeParams(Params):
    resolution_level: int = 9
    fov_x: float = 0.0  # degrees; 0 recovers the focal from the predicted points
    force_projection: bool = True
    apply_mask: bool = True


@register
class MoGeInferFn(ModelFn):
    """inputs: image [B,H,W,3] 0..1; outputs: points [B,H,W,3], depth [B,H,W], intrinsics [B,3,3], mask [B,H,W]
    (uint8: tensors cross the data plane as numbers) and normal [B,H,W,3] when the file has a normal head."""

    name = "moge_infer"
    Params = MoGeParams

    def setup_io(self) -> None:
        self.add_input("image")
        for name in ("points", "depth", "intrinsics", "mask", "normal"):
            self.add_output(name)

    def load_model(self, ref: ModelRef) -> MoGe2:
        from nodes.models.moge import build_moge
        from nodes.models.safetensors_io import load_state_dict

        return build_moge(load_state_dict(ref.sources[0], ref.digests[0]))

    def execute(self, model: MoGe2, inputs: dict[str, Any], params: MoGeParams) -> dict[str, torch.Tensor]:
        from nodes.models.moge import infer

        image = inputs["image"][..., :3].movedim(-1, -3).contiguous()
        out = infer(
            model,
            image,
            resolution_level=params.resolution_level,
            fov_x=None if params.fov_x <= 0 else float(params.fov_x),
            force_projection=params.force_projection,
            apply_mask=params.apply_mask,
        )
        out["mask"] = out["mask"].to(torch.uint8)
        return out
