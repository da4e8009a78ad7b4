"""Chroma's text encoder: T5-XXL alone, as ComfyUI's CLIPLoader type chroma builds it (its PixArt T5 tokenizer and
model, comfy/text_encoders/pixart_t5.py): no start token, </s> at the end, no padding (at least one token), no
attention mask, no pooled output; the empty prompt that weighted tokens are moved against is all padding (PixArt's
gen_empty_tokens leaves the end token out). T5TokenizerOptions' min_padding / min_length apply as for Flux's T5."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import torch

from cluster.refs import ModelRef
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.flux_configs import config_for_sources
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.flux_tokenize import ChunkRules, encode_weighted, tokenize_weighted, with_tokenizer_options
from nodes.models.fp8 import dequantize_scaled_fp8
from nodes.models.t5 import T5_MARKER, build_t5, t5_hidden_states, tokenizer_from_vocab
from nodes.models.t5_tokenizer import find_t5_tokenizer

# ComfyUI's PixArt T5XXLTokenizer: pad_with_end False, min_length 1, no padding to a length.
T5_RULES = ChunkRules(start=None, end=1, pad=0, max_length=99_999_999, pad_to_max_length=False, min_length=1)


@dataclass
class ChromaTextEncoder(TextEncoder):
    tokenizer: Callable[[str], list[int]] | None = None
    rules: ChunkRules = T5_RULES

    def tokenize(self, text: str) -> dict[str, list[list[tuple[int, float]]]]:
        return {"t5xxl": tokenize_weighted(text, self.tokenizer, self.rules)}

    @torch.no_grad()
    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, None]:
        t5 = self.modules["t5xxl"]

        def run(ids: torch.Tensor) -> tuple[torch.Tensor, None]:
            return t5_hidden_states(t5, ids.to(t5.device), self.layer).float(), None

        cond, _ = encode_weighted(tokens["t5xxl"], replace(self.rules, end=None), run)  # empty prompt: all pad
        return cond, None


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> ChromaTextEncoder:
    """Chroma's CLIP object from CLIPLoader's T5-XXL file (HF layout, bare or under a prefix)."""
    if isinstance(state_dicts, Mapping):
        state_dicts = [state_dicts]
    path = ref.sources[0] if ref.sources else None
    found = [(sd, p) for sd, p in zip(state_dicts, ref.sources) if find_prefix(sd.keys(), T5_MARKER) is not None]
    if len(found) != 1:
        raise ModelLoadError(path, f"Chroma's text encoder is one T5-XXL file; {len(found)} T5 weights found")
    sd, t5_path = found[0]
    sd = dequantize_scaled_fp8(sd)  # t5xxl_fp8_e4m3fn_scaled (the templates' file): weights x scales
    t5 = build_t5(strip_prefix(sd, find_prefix(sd.keys(), T5_MARKER)), t5_path)
    folder, config = config_for_sources(ref.sources)
    vocab = config.get("t5", {}).get("vocab")
    tokenizer = (
        tokenizer_from_vocab(folder / vocab)
        if folder is not None and vocab
        else find_t5_tokenizer(t5_path, t5.config.vocab_size)
    )
    options = dict(ref.option("tokenizer_options", ()))
    return ChromaTextEncoder(
        arch="chroma",
        modules={"t5xxl": t5},
        layer=int(ref.option("layer", -1)),
        tokenizer=tokenizer,
        rules=with_tokenizer_options(T5_RULES, options, "t5xxl"),
    )
