"""CLIP vision encoding as a ModelFn: IMAGE in, ComfyUI's CLIP_VISION_OUTPUT tensors out. The file is a CLIP
ViT tower (nodes/models/clip_vision.py) or a SigLIP one (nodes/models/siglip_vision.py); only SigLIP gives
all_hidden_states (None for CLIP, whose ComfyUI output has no such field)."""

from __future__ import annotations

from typing import Any

import torch

from cluster.call import Params
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef
from nodes.models.clip_vision import ClipVisionEncoder
from nodes.models.siglip_vision import SiglipVisionEncoder

OUTPUTS = ("last_hidden_state", "image_embeds", "penultimate_hidden_states", "all_hidden_states", "mm_projected")


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

    def load_model(self, ref: ModelRef) -> ClipVisionEncoder | SiglipVisionEncoder:
        from nodes.models.clip_vision import load_clip_vision
        from nodes.models.safetensors_io import load_state_dict
        from nodes.models.siglip_vision import is_siglip_vision, load_siglip_vision

        sd = load_state_dict(ref.sources[0], ref.digests[0])
        load = load_siglip_vision if is_siglip_vision(sd) else load_clip_vision
        return load(sd, ref.sources[0])

    def execute(
        self, model: ClipVisionEncoder | SiglipVisionEncoder, inputs: dict[str, Any], params: ClipVisionParams
    ) -> dict[str, torch.Tensor | None]:
        return {"all_hidden_states": None, "mm_projected": None, **model.encode(inputs["image"], params.crop)}
