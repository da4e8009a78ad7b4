"""FLUX 3's text encoder: Qwen3-VL-4B (CLIPLoader type flux3, the template's qwen3vl_4b*.safetensors in
transformers' Qwen3VLForConditionalGeneration names; only the language model runs).

As diffusers 0.42's Flux3 modular pipeline encodes a prompt (Flux3TextEncoderStep; ComfyUI's FLUX 3 encoder was
not readable here): the prompt as the user turn of Qwen's chat template with the assistant turn opened, right-
padded with `<|endoftext|>` to a multiple of 80 tokens (8192 at most), the padding masked as keys and given
position 1, and the conditioning the hidden states after decoder layers 4, 8, ..., 32 side by side per token
([1, T, 8 * width]: 20480 for the 4B). The padded rows are part of the conditioning, as in diffusers: the
transformer takes no text mask. Tokenizer: the shipped Qwen one (nodes.models.qwen_tokenizer)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from cluster.refs import ModelRef
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix
from nodes.models.fp8 import dequantize_scaled_fp8
from nodes.models.qwen_image21_text import LM_MARKER, build_language_model
from nodes.models.qwen_tokenizer import QwenTokenizer, qwen_tokenizer
from nodes.models.tokenizer import escape_parens, unescape_parens
from nodes.models.zimage_text import tokenizer_dirs

CHAT = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
PAD = "<|endoftext|>"
PAD_MULTIPLE = 80
MAX_TOKENS = 8192
TAPS = (4, 8, 12, 16, 20, 24, 28, 32)
SUB = "qwen3vl_4b"


@dataclass
class Flux3TextEncoder(TextEncoder):
    tokenizer: QwenTokenizer | None = None

    def pad_id(self) -> int:
        pad = self.tokenizer.token_id(PAD)
        if pad is None:
            raise ValueError(f"the Qwen tokenizer has no {PAD} token")
        return pad

    def tokenize(self, text: str) -> dict[str, list[list[tuple[int, float]]]]:
        plain = unescape_parens(escape_parens(text))  # no weighting syntax, as for the other Qwen encoders
        ids = self.tokenizer.encode(CHAT.format(plain))[:MAX_TOKENS]
        padded = min(math.ceil(len(ids) / PAD_MULTIPLE) * PAD_MULTIPLE, MAX_TOKENS)
        ids += [self.pad_id()] * (padded - len(ids))
        return {SUB: [[(t, 1.0) for t in ids]]}

    @torch.no_grad()
    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, None]:
        ids = [t for chunk in tokens[SUB] for t, _ in chunk]
        pad = self.pad_id()
        real = len(ids)
        while real and ids[real - 1] == pad:  # the prompt itself ends with the opened assistant turn
            real -= 1
        model = self.modules[SUB]
        if len(model.layers) <= TAPS[-1]:
            raise ValueError(f"FLUX 3 reads decoder layer {TAPS[-1]}; this text encoder has {len(model.layers)}")
        device = model.embed_tokens.weight.device
        mask = torch.zeros(1, len(ids), dtype=torch.long, device=device)
        mask[:, :real] = 1
        positions = torch.arange(len(ids), device=device)[None].masked_fill(mask == 0, 1)
        out = model(
            input_ids=torch.tensor([ids], device=device),
            attention_mask=mask,
            position_ids=positions,
            use_cache=False,
            output_hidden_states=True,
        )
        return torch.stack([out.hidden_states[i] for i in TAPS], dim=2).flatten(2).float(), None


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> Flux3TextEncoder:
    """FLUX 3's CLIP object from CLIPLoader's Qwen3-VL file."""
    if isinstance(state_dicts, Mapping):
        state_dicts = [state_dicts]
    path = ref.sources[0] if ref.sources else None
    sd = next((s for s in state_dicts if find_prefix(s.keys(), LM_MARKER) is not None), None)
    if sd is None:
        raise ModelLoadError(path, "FLUX 3 needs a Qwen3-VL text encoder (qwen3vl_4b.safetensors); none found")
    model = build_language_model(dequantize_scaled_fp8(sd), path)
    return Flux3TextEncoder(
        arch="flux3", modules={SUB: model}, layer=None, tokenizer=qwen_tokenizer(tokenizer_dirs(), path)
    )
