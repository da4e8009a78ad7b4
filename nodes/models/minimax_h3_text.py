"""MiniMax H3's text encoder: Qwen3-VL-32B truncated to 50 decoder layers (CLIPLoader type minimax, ComfyUI's file
qwen3vl_32b_minimax_h3*.safetensors in transformers' Qwen3VLForConditionalGeneration names).

As the newest ComfyUI source encodes a prompt for it (comfy/text_encoders/minimax.py): no chat template and no
special tokens, the raw prompt's Qwen2 ids (weighting syntax off, an empty prompt read as the pad token
<|endoftext|>), and the conditioning is the last layer's output before the final norm, i.e. the state after layer
50 (diffusers' MiniMax H3 pipeline reads hidden_states[50] of the untruncated model: the same tensor). Every row
is a text row for the transformer's modality tags. Only the language model runs: prompts with images or videos
(the vision tower: first/last frames, references) are not supported yet; MiniMax's extra special tokens (<d>,
<|cutoff|>, ...) and prompt embeddings are not parsed either."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from cluster.refs import ModelRef
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix
from nodes.models.qwen_image21_text import LM_MARKER, build_language_model
from nodes.models.qwen_tokenizer import QwenTokenizer, qwen_tokenizer
from nodes.models.tokenizer import escape_parens, unescape_parens
from nodes.models.zimage_text import tokenizer_dirs

SUB = "qwen3vl_32b"  # ComfyUI's name for the sub-encoder (its token dict key)
PAD = 151643  # <|endoftext|>: ComfyUI's whole presentation when the prompt is empty


@dataclass
class MiniMaxH3TextEncoder(TextEncoder):
    tokenizer: QwenTokenizer | None = None

    def tokenize(self, text: str) -> dict[str, list[list[tuple[int, float]]]]:
        ids = self.tokenizer.encode(unescape_parens(escape_parens(text))) if text else []
        return {SUB: [[(t, 1.0) for t in ids or [PAD]]]}

    @torch.no_grad()
    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, None]:
        ids = [t for chunk in tokens[SUB] for t, _ in chunk]
        model = self.modules[SUB]
        captured: list[torch.Tensor] = []
        # the last layer's own output: transformers' last hidden state has the final norm applied
        handle = model.layers[-1].register_forward_hook(
            lambda module, args, output: captured.append(output[0] if isinstance(output, tuple) else output)
        )
        try:
            model(input_ids=torch.tensor([ids], device=model.embed_tokens.weight.device), use_cache=False)
        finally:
            handle.remove()
        return captured[0].float(), None


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> MiniMaxH3TextEncoder:
    """MiniMax H3's CLIP object from CLIPLoader's Qwen3-VL file."""
    if isinstance(state_dicts, Mapping):
        state_dicts = [state_dicts]
    path = ref.sources[0] if ref.sources else None
    sd = next((s for s in state_dicts if find_prefix(s.keys(), LM_MARKER) is not None), None)
    if sd is None:
        raise ModelLoadError(path, "MiniMax H3 needs its Qwen3-VL text encoder (qwen3vl_32b_minimax_h3*); none found")
    return MiniMaxH3TextEncoder(
        arch="minimax_h3",
        modules={SUB: build_language_model(sd, path)},
        layer=None,
        tokenizer=qwen_tokenizer(tokenizer_dirs(), path),
    )
