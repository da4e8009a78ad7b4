"""CLIP vision encoding as a ModelFn: IMAGE in, ComfyUI's CLIP_VISION_OUTPUT tensors out."""

from __future__ import annotations

from typing import Any

import torch

from cluster.call import Params
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef
from nodes.models.clip_vision import ClipVisionEncoder

OUTPUTS = ("last_hidden_state", "image_embeds", "penultimate_hidden_states")


class ClipVisionParams(Params):
    crop: bool  # True: center crop; False: squash to a square


@register
class ClipVisionEncodeFn(ModelFn):
    """inputs: image [B,H,W,C] 0..1; params: crop (True: center crop, False: squash to a square)."""

    name = "clip_vision_encode"
    Params = ClipVisionParams

    def setup_io(self) -> None:
        self.add_input("image")
        for name in OUTPUTS:
            self.add_output(name)

    def load_model(self, ref: ModelRef) -> ClipVisionEncoder:
        from nodes.models.clip_vision import load_clip_vision
        from nodes.models.safetensors_io import load_state_dict

        return load_clip_vision(load_state_dict(ref.sources[0], ref.digests[0]), ref.sources[0])

    def execute(
        self, model: ClipVisionEncoder, inputs: dict[str, Any], params: ClipVisionParams
    ) -> dict[str, torch.Tensor]:
        return model.encode(inputs["image"], params.crop)
