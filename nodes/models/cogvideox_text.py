"""CogVideoX's text encoder: T5-XXL alone, as the newest ComfyUI's CLIPLoader type cogvideox builds it
(comfy/text_encoders/cogvideo.py: SD3's T5-XXL model and tokenizer with at least 226 tokens): no start token, </s>
after the prompt, padded with 0 to 226 tokens, no attention mask, the last layer's states (final norm applied); the
empty prompt that weighted tokens move against is </s> and padding, as ComfyUI's SD1-style empty tokens are. The
weights and tokenizer are read as Chroma's T5 file is (nodes/models/chroma_text.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

import torch

from cluster.refs import ModelRef
from nodes.models.chroma_text import ChromaTextEncoder
from nodes.models.chroma_text import load_text_encoder as load_t5
from nodes.models.flux_tokenize import ChunkRules, encode_weighted, with_tokenizer_options
from nodes.models.t5 import t5_hidden_states

RULES = ChunkRules(start=None, end=1, pad=0, max_length=99_999_999, pad_to_max_length=False, min_length=226)


@dataclass
class CogVideoXTextEncoder(ChromaTextEncoder):
    @torch.no_grad()
    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, None]:
        t5 = self.modules["t5xxl"]

        def run(ids: torch.Tensor) -> tuple[torch.Tensor, None]:
            return t5_hidden_states(t5, ids.to(t5.device), self.layer).float(), None

        cond, _ = encode_weighted(tokens["t5xxl"], self.rules, run)
        return cond, None


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> CogVideoXTextEncoder:
    """CogVideoX's CLIP object from CLIPLoader's T5-XXL file (type cogvideox)."""
    base = load_t5(ref, state_dicts)
    encoder = CogVideoXTextEncoder(**{f.name: getattr(base, f.name) for f in fields(base)})
    encoder.arch = "cogvideox"
    encoder.rules = with_tokenizer_options(RULES, dict(ref.option("tokenizer_options", ())), "t5xxl")
    return encoder
