"""Cosmos Predict2's text encoder: the old T5-XXL (t5-11b's encoder: T5 1.0, 1024 wide, ReLU feed-forward), as
ComfyUI 0.3.64 builds it for any CLIPLoader type once it detects that file (comfy/text_encoders/cosmos.py): no start
token, </s> (1) after the prompt, padded with 0 to at least 512 tokens; the padding is masked out of the T5's own
attention and its states are zeroed (zero_out_masked). The conditioning is those [1, >=512, 1024] states. Tokenizer
and weights are read as Chroma's T5 file is (nodes/models/chroma_text.py). ComfyUI's Cosmos encoder keeps its weights
in the text encoders' storage dtype, fp16, whatever the file's (cosmos.te ignores the detected dtype once CLIP passes
its own) and computes in fp32: a wider file's weights are rounded to fp16 here too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

import torch

from cluster.refs import ModelRef
from nodes.models.chroma_text import load_text_encoder as load_t5
from nodes.models.flux_tokenize import ChunkRules, encode_weighted, with_tokenizer_options
from nodes.models.ltxv_text import END, PAD, LTXVTextEncoder, token_mask

RULES = ChunkRules(start=None, end=END, pad=PAD, max_length=99_999_999, pad_to_max_length=False, min_length=512)


@dataclass
class CosmosTextEncoder(LTXVTextEncoder):
    @torch.no_grad()
    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, None]:
        t5 = self.modules["t5xxl"]

        def run(ids: torch.Tensor) -> tuple[torch.Tensor, None]:
            mask = token_mask(ids).to(t5.device)
            ids = ids.to(t5.device)
            if self.layer == -1:
                states = t5(input_ids=ids, attention_mask=mask).last_hidden_state
            else:
                hidden = t5(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
                states = t5.encoder.final_layer_norm(hidden[self.layer])
            return (states * mask.unsqueeze(-1).to(states)).float(), None

        cond, _ = encode_weighted(tokens["t5xxl"], self.rules, run)
        return cond, None

    def extras(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> dict[str, torch.Tensor]:
        return {}  # ComfyUI's mask beside the conditioning is unread by model_base.CosmosPredict2


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> CosmosTextEncoder:
    """Cosmos' CLIP object from CLIPLoader's old T5-XXL file."""
    base = load_t5(ref, state_dicts)
    with torch.no_grad():
        for weight in base.modules["t5xxl"].parameters():
            if weight.dtype in (torch.float32, torch.float64):
                weight.copy_(weight.to(torch.float16))
    encoder = CosmosTextEncoder(**{f.name: getattr(base, f.name) for f in fields(base)})
    encoder.arch = "cosmos_predict2"
    encoder.rules = with_tokenizer_options(RULES, dict(ref.option("tokenizer_options", ())), "t5xxl")
    return encoder
