"""Text encoding as a ModelFn: prompt text in, CONDITIONING tensors out."""
from __future__ import annotations

from typing import Any

import torch

from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef
from nodes.models.components import TextEncoder


@register
class TextEncode(ModelFn):
    """params: text, or texts (a text per sub-encoder) and equal_chunks. Tokenises with the encoder's own
    tokenizer (ComfyUI's weighting syntax) and encodes."""
    name = "text_encode"

    def setup_io(self) -> None:
        self.add_output("cond")
        self.add_output("pooled")

    def load_model(self, ref: ModelRef) -> TextEncoder:
        from nodes.models.loader import load_text_encoder
        return load_text_encoder(ref)

    def execute(self, model: TextEncoder, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, torch.Tensor]:
        cond, pooled = model.encode(tokens_for(model, params))
        out = {"cond": cond}
        if pooled is not None:
            out["pooled"] = pooled
        return out


def tokens_for(model: TextEncoder, params: dict[str, Any]) -> dict[str, list[list[tuple[int, float]]]]:
    """The tokens per sub-encoder: of `text`, or each sub-encoder's own text from `texts` (CLIPTextEncodeSDXL's
    text_g/text_l, CLIPTextEncodeFlux's clip_l/t5xxl). With `equal_chunks` the sub-encoders with fewer chunks
    get the empty prompt's chunks appended until all have as many, as CLIPTextEncodeSDXL does."""
    texts = params.get("texts")
    if not texts:
        return model.tokenize(params["text"])
    tokens = {sub: model.tokenize(text)[sub] for sub, text in texts.items()}
    if params.get("equal_chunks"):
        empty = model.tokenize("")
        most = max(len(chunks) for chunks in tokens.values())
        for sub, chunks in tokens.items():
            while len(chunks) < most:
                chunks += empty[sub]
    return tokens
