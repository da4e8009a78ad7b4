"""Text encoding as a ModelFn: prompt text in, CONDITIONING tensors out."""
from __future__ import annotations

from typing import Any

import torch

from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef
from nodes.models.components import TextEncoder


@register
class TextEncode(ModelFn):
    """params: text. Tokenises with the encoder's own tokenizer (ComfyUI's weighting syntax) and encodes."""
    name = "text_encode"

    def setup_io(self) -> None:
        self.add_output("cond")
        self.add_output("pooled")

    def load_model(self, ref: ModelRef) -> TextEncoder:
        from nodes.models.loader import load_text_encoder
        return load_text_encoder(ref)

    def execute(self, model: TextEncoder, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, torch.Tensor]:
        cond, pooled = model.encode(model.tokenize(params["text"]))
        out = {"cond": cond}
        if pooled is not None:
            out["pooled"] = pooled
        return out
