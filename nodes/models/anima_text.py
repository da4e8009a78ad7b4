"""Anima's text encoder: Qwen3 0.6B (ComfyUI's text_encoders/qwen_3_06b_base.safetensors, CLIPLoader type
stable_diffusion), encoded as ComfyUI's comfy/text_encoders/anima.py does (0.10.0 and the newest source).

The prompt is tokenized twice with ComfyUI's weighting syntax: by Qwen's tokenizer (no start or end token, at
least one token, the weights dropped) for the conditioning, the Qwen3 model's last hidden states after its final
norm (masked from the first <|endoftext|> on, ComfyUI's pad rule); and by T5's tokenizer (</s> at the end) for
the diffusion model's LLM adapter, which embeds those ids: they travel beside the conditioning as `t5xxl_ids`
with their weights as `t5xxl_weights`, the keys ComfyUI gives them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from cluster.refs import ModelRef
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.flux_tokenize import ChunkRules, tokenize_weighted
from nodes.models.qwen3_text import build_qwen3, find_qwen3_prefix, qwen3_hidden_states, qwen3_layer_output
from nodes.models.qwen_image_text import attention_mask
from nodes.models.qwen_tokenizer import ENDOFTEXT_ID, qwen_tokenizer
from nodes.models.t5_tokenizer import T5_EMBEDDINGS, find_t5_tokenizer
from nodes.models.zimage_text import tokenizer_dirs

SUB, T5 = "qwen3_06b", "t5xxl"  # ComfyUI's names of the two token lists
QWEN_RULES = ChunkRules(
    start=None, end=None, pad=ENDOFTEXT_ID, max_length=99_999_999, pad_to_max_length=False, min_length=1
)
T5_RULES = ChunkRules(start=None, end=1, pad=0, max_length=99_999_999, pad_to_max_length=False, min_length=1)


@dataclass
class AnimaTextEncoder(TextEncoder):
    qwen_encode: Callable[[str], list[int]] | None = None
    t5_encode: Callable[[str], list[int]] | None = None

    def tokenize(self, text: str) -> dict[str, list[list[tuple[int, float]]]]:
        qwen = tokenize_weighted(text, self.qwen_encode, QWEN_RULES)
        return {
            SUB: [[(t, 1.0) for t, _ in chunk] for chunk in qwen],
            T5: tokenize_weighted(text, self.t5_encode, T5_RULES),
        }

    @torch.no_grad()
    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, None]:
        ids = [t for chunk in tokens[SUB] for t, _ in chunk] or [ENDOFTEXT_ID]
        model, mask = self.modules[SUB], attention_mask(ids)
        if not mask[0, 0]:  # an empty prompt is <|endoftext|> alone, fully masked: ComfyUI 0.10.0 gives NaN there;
            mask = None  # here it attends to itself (tests/models/test_anima.py)
        if self.layer is not None:  # CLIPSetLastLayer: ComfyUI's "hidden" layer, before the final norm
            return qwen3_layer_output(model, torch.tensor([ids]), int(self.layer), mask).float(), None
        return qwen3_hidden_states(model, torch.tensor([ids]), mask)[-1].float(), None

    def extras(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> dict[str, torch.Tensor]:
        """What ComfyUI's encoder puts beside the conditioning: the first T5 chunk's ids and weights."""
        first = tokens[T5][0] if tokens.get(T5) else [(1, 1.0)]
        return {
            "t5xxl_ids": torch.tensor([t for t, _ in first], dtype=torch.int64),
            "t5xxl_weights": torch.tensor([w for _, w in first], dtype=torch.float32),
        }


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> AnimaTextEncoder:
    """Anima's CLIP object from CLIPLoader's Qwen3 0.6B file."""
    if isinstance(state_dicts, Mapping):
        state_dicts = [state_dicts]
    path = ref.sources[0] if ref.sources else None
    sd = next((s for s in state_dicts if find_qwen3_prefix(s.keys()) is not None), None)
    if sd is None:
        raise ModelLoadError(path, "Anima needs a Qwen3 0.6B text encoder (qwen_3_06b_base.safetensors); none found")
    model = build_qwen3(sd, path)
    return AnimaTextEncoder(
        arch="anima",
        modules={SUB: model},
        layer=ref.option("layer"),
        qwen_encode=qwen_tokenizer(tokenizer_dirs(), path).encode,
        t5_encode=find_t5_tokenizer(path, T5_EMBEDDINGS),
    )
