"""PhotoMaker's ID encoder as a ModelFn: the reference image and the prompt's states in, the prompt's states with
the class word's row fused with the face's identity out (nodes/models/photomaker.py)."""

from __future__ import annotations

from typing import Any

import torch

from cluster.call import Params
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef
from nodes.models.photomaker import PhotoMakerIDEncoder


class PhotoMakerParams(Params):
    class_token: int  # the row of the class word (the token before the removed trigger word)


@register
class PhotoMakerFuseFn(ModelFn):
    """inputs: pixel_values [N,3,224,224] (CLIP-preprocessed; the first is used, as in ComfyUI), prompt_embeds
    [1,T,D]; params: class_token; output: cond [1,T,D]."""

    name = "photomaker_fuse"
    Params = PhotoMakerParams

    def setup_io(self) -> None:
        self.add_input("pixel_values")
        self.add_input("prompt_embeds")
        self.add_output("cond")

    def load_model(self, ref: ModelRef) -> PhotoMakerIDEncoder:
        from nodes.models.photomaker import load_photomaker, read_photomaker_file

        return load_photomaker(read_photomaker_file(ref.sources[0], ref.digests[0]), ref.sources[0])

    def execute(self, model: PhotoMakerIDEncoder, inputs: dict[str, Any], params: PhotoMakerParams) -> dict:
        cond = model.apply(inputs["pixel_values"], inputs["prompt_embeds"], params.class_token)
        return {"cond": cond.to(torch.float32)}
