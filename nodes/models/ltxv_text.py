"""LTX-Video 0.9's text encoder: T5-XXL alone, as ComfyUI 0.3.64's CLIPLoader type ltxv builds it
(comfy/text_encoders/lt.py: Mochi's T5 with its attention mask, LTXV's tokenizer). Its rules: no start token,
</s> (1) after the prompt, padded with 0 to at least 128 tokens; the padding is masked out of the T5's own
attention (its states are not zeroed), and the mask (1 up to and including the first </s>) goes beside the
conditioning as "attention_mask", which the LTX-Video transformer applies to its cross-attention. The tokenizer and
weights are read as Chroma's T5 file is (nodes/models/chroma_text.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

import torch

from cluster.refs import ModelRef
from nodes.models.chroma_text import ChromaTextEncoder
from nodes.models.chroma_text import load_text_encoder as load_t5
from nodes.models.flux_tokenize import ChunkRules, encode_weighted, with_tokenizer_options

END, PAD = 1, 0
RULES = ChunkRules(start=None, end=END, pad=PAD, max_length=99_999_999, pad_to_max_length=False, min_length=128)


def token_mask(ids: torch.Tensor) -> torch.Tensor:
    """ComfyUI's SDClipModel mask: 1 up to and including each row's first </s>, 0 after it."""
    ended = (ids == END).long().cumsum(dim=1)
    return ((ended == 0) | ((ended == 1) & (ids == END))).long()


@dataclass
class LTXVTextEncoder(ChromaTextEncoder):
    @torch.no_grad()
    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, None]:
        t5 = self.modules["t5xxl"]

        def run(ids: torch.Tensor) -> tuple[torch.Tensor, None]:
            mask = token_mask(ids).to(t5.device)
            ids = ids.to(t5.device)
            if self.layer == -1:
                return t5(input_ids=ids, attention_mask=mask).last_hidden_state.float(), None
            hidden = t5(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
            return t5.encoder.final_layer_norm(hidden[self.layer]).float(), None

        cond, _ = encode_weighted(tokens["t5xxl"], self.rules, run)
        return cond, None

    def extras(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> dict[str, torch.Tensor]:
        """The prompt's windows' masks side by side [1, T] (ComfyUI's attention_mask beside the conditioning)."""
        masks = [token_mask(torch.tensor([[t for t, _ in window]], dtype=torch.long)) for window in tokens["t5xxl"]]
        return {"attention_mask": torch.cat(masks, dim=1)}


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> LTXVTextEncoder:
    """LTX-Video's CLIP object from CLIPLoader's T5-XXL file (type ltxv)."""
    base = load_t5(ref, state_dicts)
    encoder = LTXVTextEncoder(**{f.name: getattr(base, f.name) for f in fields(base)})
    encoder.arch = "ltxv"
    encoder.rules = with_tokenizer_options(RULES, dict(ref.option("tokenizer_options", ())), "t5xxl")
    return encoder
