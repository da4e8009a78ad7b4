"""Krea 2's text encoder: Qwen3-VL-4B (CLIPLoader type krea2, the file qwen3vl_4b*.safetensors in transformers'
Qwen3VLForConditionalGeneration names; only the language model runs).

As diffusers 0.42's Krea2Pipeline encodes a prompt (get_text_hidden_states; ComfyUI's Krea 2 encoder was not
readable here): the prompt follows Krea's system turn and the user tag, the assistant suffix is tokenized apart
and appended, and the conditioning is the stack of every third decoder layer's output from the second
(hidden states 2, 5, ..., 35 of the 36-layer model: 12 layers) without the system prefix's tokens. diffusers pads
the prompt to 512 tokens in the middle and masks the padding out everywhere (text positions skip it, the
transformer puts all text at rotary position 0), so the unpadded sequence used here gives the same image
(tests/models/test_krea2_text.py). The stack travels flattened, [1,T,L*D]; nodes.models.krea2 splits it."""

from __future__ import annotations

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

PREFIX = (
    "<|im_start|>system\nDescribe the image by detailing the color, shape, size, texture, quantity, text, "
    "spatial relationships of the objects and background:<|im_end|>\n<|im_start|>user\n"
)
SUFFIX = "<|im_end|>\n<|im_start|>assistant\n"
SUB = "qwen3vl_4b"


def tapped_layers(num_layers: int) -> tuple[int, ...]:
    """The hidden-state indices Krea 2 stacks: every third from 2 below the layer count (2..35 of 36)."""
    return tuple(range(2, num_layers, 3))


@dataclass
class Krea2TextEncoder(TextEncoder):
    tokenizer: QwenTokenizer | None = None

    def tokenize(self, text: str) -> dict[str, list[list[tuple[int, float]]]]:
        plain = unescape_parens(escape_parens(text))  # no weighting syntax, as for the other Qwen encoders
        ids = self.tokenizer.encode(PREFIX + plain) + self.tokenizer.encode(SUFFIX)
        return {SUB: [[(t, 1.0) for t in ids]]}

    @torch.no_grad()
    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, None]:
        ids = [t for chunk in tokens[SUB] for t, _ in chunk]
        model = self.modules[SUB]
        out = model(
            input_ids=torch.tensor([ids], device=model.embed_tokens.weight.device),
            use_cache=False,
            output_hidden_states=True,
        )
        taps = tapped_layers(len(model.layers))
        stack = torch.stack([out.hidden_states[i] for i in taps], dim=2)
        skip = len(self.tokenizer.encode(PREFIX))  # the system turn and user tag (34 tokens)
        return stack[:, skip:].flatten(2).float(), None


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> Krea2TextEncoder:
    """Krea 2's CLIP object from CLIPLoader's Qwen3-VL file."""
    if isinstance(state_dicts, Mapping):
        state_dicts = [state_dicts]
    path = ref.sources[0] if ref.sources else None
    sd = next((s for s in state_dicts if find_prefix(s.keys(), LM_MARKER) is not None), None)
    if sd is None:
        raise ModelLoadError(path, "Krea 2 needs a Qwen3-VL text encoder (qwen3vl_4b.safetensors); none found")
    model = build_language_model(dequantize_scaled_fp8(sd), path)  # qwen3vl_4b_fp8_scaled: weights x scales
    return Krea2TextEncoder(
        arch="krea2", modules={SUB: model}, layer=None, tokenizer=qwen_tokenizer(tokenizer_dirs(), path)
    )
