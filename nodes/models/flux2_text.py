"""FLUX.2 Klein's text conditioning, as the newest ComfyUI's KleinTokenizer / Qwen3_4BModel / Flux2TEModel do it:
the prompt in Qwen3's chat template (thinking turned off), tokenized with no weight syntax, padded on the right
with <|endoftext|> to at least 512 tokens; Qwen3 runs with the padding masked, and the hidden states entering
layers 9, 18 and 27 (transformers' hidden_states[9], [18], [27]) are joined per token along the features:
[1, T, 3 x hidden] (7680 wide for Qwen3-4B). No pooled output."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.qwen3_text import build_qwen3, qwen3_hidden_states  # the Qwen3 shared with Z-Image
from nodes.models.qwen_tokenizer import qwen_tokenizer
from nodes.models.tokenizer import escape_parens, unescape_parens
from nodes.models.zimage_text import tokenizer_dirs

KLEIN_LAYERS = (9, 18, 27)
KLEIN_TEMPLATE = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
MIN_TOKENS = 512
PAD_ID = 151643  # <|endoftext|>
SUB = "qwen3_4b"  # ComfyUI's name for the sub-encoder (the token dict's key)


def klein_token_ids(encode, text: str) -> list[int]:
    """The ids of `text` in Klein's template, padded to at least 512. No weight syntax, but ComfyUI's
    tokenizer still turns "\\(" / "\\)" into plain parentheses."""
    ids = list(encode(KLEIN_TEMPLATE.format(unescape_parens(escape_parens(text)))))
    return ids + [PAD_ID] * max(0, MIN_TOKENS - len(ids))


def attention_mask(ids: torch.Tensor) -> torch.Tensor:
    """ComfyUI's mask for a tokenizer with no end token: 1 up to the first pad token, 0 from it on."""
    return (torch.cumsum((ids == PAD_ID).long(), dim=-1) == 0).long()


def stack_hidden_states(hidden_states: Sequence[torch.Tensor]) -> torch.Tensor:
    """hidden_states[9], [18], [27], each [B,T,D], as [B,T,3D] with each token's three states side by side."""
    missing = [i for i in KLEIN_LAYERS if i >= len(hidden_states)]
    if missing:
        raise ValueError(
            f"Klein reads the states entering layers {KLEIN_LAYERS}; this text encoder has only "
            f"{len(hidden_states) - 1} layers"
        )
    out = torch.stack([hidden_states[i] for i in KLEIN_LAYERS], dim=2)
    return out.reshape(out.shape[0], out.shape[1], -1)


@dataclass
class KleinTextEncoder(TextEncoder):
    """ComfyUI's CLIP object for FLUX.2 Klein over one Qwen3 model (`modules["qwen3_4b"]`)."""

    encode_text: Any = None  # str -> list[int]: the Qwen2 BPE

    def tokenize(self, text: str) -> dict[str, list[list[tuple[int, float]]]]:
        return {SUB: [[(i, 1.0) for i in klein_token_ids(self.encode_text, text)]]}

    @torch.no_grad()
    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, None]:
        ids = torch.tensor([[i for chunk in tokens[SUB] for i, _ in chunk]], dtype=torch.long)
        cond = stack_hidden_states(qwen3_hidden_states(self.modules[SUB], ids, attention_mask(ids))).float()
        return cond, None


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> KleinTextEncoder:
    """Klein's CLIP object from CLIPLoader's Qwen3 file (type flux2)."""
    if not isinstance(state_dicts, Mapping):
        if len(state_dicts) != 1:
            raise ModelLoadError(ref.sources[0], "FLUX.2 Klein takes one text encoder file (Qwen3)")
        state_dicts = state_dicts[0]
    path = ref.sources[0] if ref.sources else None
    model = build_qwen3(state_dicts, path)
    tokenizer = qwen_tokenizer(tokenizer_dirs(), path)
    return KleinTextEncoder(arch="flux2", modules={SUB: model}, encode_text=tokenizer.encode)
