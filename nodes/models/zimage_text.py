"""Z-Image's text encoder: Qwen3-4B (CLIPLoader type "lumina2", ComfyUI's file qwen_3_4b.safetensors).

As the newest ComfyUI encodes for Z-Image: the prompt goes into Qwen's chat template with no weighting
syntax, is tokenized with Qwen2's tokenizer (no start/end tokens, pad 151643) and the conditioning is the
output of the second-to-last layer, not normed, for every token of the templated prompt; no pooled vector."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from cluster.refs import ModelRef
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.qwen3_text import build_qwen3, find_qwen3_prefix, qwen3_layer_output
from nodes.models.qwen_tokenizer import QwenTokenizer, qwen_tokenizer
from nodes.models.tokenizer import escape_parens, unescape_parens

TEMPLATE = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
SUB = "qwen3_4b"  # ComfyUI's name for the sub-encoder (its token dict key)
LAYER = -2  # ComfyUI: layer="hidden", layer_idx=-2, no final norm


def tokenizer_dirs() -> list[Path]:
    """Where a user's Qwen tokenizer may be: the workspace's text_encoders and configs folders."""
    from nodes.workspace import active

    ws = active()
    return ws.folder_paths("text_encoders") + ws.folder_paths("configs")


@dataclass
class ZImageTextEncoder(TextEncoder):
    tokenizer: QwenTokenizer | None = None

    def tokenize(self, text: str) -> dict[str, list[list[tuple[int, float]]]]:
        # ComfyUI tokenizes with weights disabled, but still turns "\(" / "\)" into plain parentheses.
        plain = unescape_parens(escape_parens(text))
        return {SUB: [[(t, 1.0) for t in self.tokenizer.encode(TEMPLATE.format(plain))]]}

    @torch.no_grad()
    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, None]:
        ids = [t for chunk in tokens[SUB] for t, _ in chunk]
        layer = LAYER if self.layer is None else int(self.layer)  # CLIPSetLastLayer picks another
        out = qwen3_layer_output(self.modules[SUB], torch.tensor([ids], dtype=torch.long), layer)
        return out.float(), None


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> ZImageTextEncoder:
    """Z-Image's CLIP object from CLIPLoader's Qwen3 file (or a checkpoint holding one)."""
    if isinstance(state_dicts, Mapping):
        state_dicts = [state_dicts]
    path = ref.sources[0] if ref.sources else None
    sd = next((s for s in state_dicts if find_qwen3_prefix(s.keys()) is not None), None)
    if sd is None:
        raise ModelLoadError(path, "Z-Image needs a Qwen3 text encoder (qwen_3_4b.safetensors); none found")
    model = build_qwen3(sd, path)
    return ZImageTextEncoder(
        arch="zimage", modules={SUB: model}, layer=ref.option("layer"), tokenizer=qwen_tokenizer(tokenizer_dirs(), path)
    )
