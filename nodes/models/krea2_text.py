"""Krea 2's text encoder: Qwen3-VL-4B (CLIPLoader type krea2, the file qwen3vl_4b*.safetensors in transformers'
Qwen3VLForConditionalGeneration names; only the language model runs).

As diffusers 0.42's Krea2Pipeline encodes a prompt (get_text_hidden_states; ComfyUI's Krea 2 encoder was not
readable here): the prompt follows Krea's system turn and the user tag, the assistant suffix is tokenized apart
and appended, and the conditioning is the stack of every third decoder layer's output from the second
(hidden states 2, 5, ..., 35 of the 36-layer model: 12 layers) without the system prefix's tokens. diffusers pads
the prompt to 512 tokens in the middle and masks the padding out everywhere (text positions skip it, the
transformer puts all text at rotary position 0), so the unpadded sequence used here gives the same image
(tests/models/test_krea2_text.py). The stack travels flattened, [1,T,L*D]; nodes.models.krea2 splits it.

With pictures (TextEncodeQwenImageEditPlus on a krea2 CLIP, the style-reference template), as today's ComfyUI
(comfy/text_encoders/krea2.py): the chat text is one string (the node's template, or Krea's with a vision block
per picture before the prompt), the file's vision tower (nodes.models.qwen3vl_vision) reads each picture into its
<|image_pad|>, the tapped states are each layer's input (after the previous layer's DeepStack add), and the
conditioning starts after the second <|im_start|> and its "user" line, the pictures' tokens kept
(tests/models/test_krea2_reference.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from cluster.refs import ModelRef
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix
from nodes.models.fp8 import dequantize_scaled_fp8
from nodes.models.qwen3vl_vision import build_vision_model, has_vision_model
from nodes.models.qwen_image21_text import (
    IM_START,
    LM_MARKER,
    VISION,
    VISION_BLOCK,
    build_language_model,
    embed_with_images,
    expanded_index,
    vision_inputs,
)
from nodes.models.qwen_tokenizer import QwenTokenizer, qwen_tokenizer
from nodes.models.tokenizer import escape_parens, unescape_parens
from nodes.models.zimage_text import tokenizer_dirs

PREFIX = (
    "<|im_start|>system\nDescribe the image by detailing the color, shape, size, texture, quantity, text, "
    "spatial relationships of the objects and background:<|im_end|>\n<|im_start|>user\n"
)
SUFFIX = "<|im_end|>\n<|im_start|>assistant\n"
SUB = "qwen3vl_4b"
USER, NEWLINE = 872, 198  # the tokens "user" and "\n" after the second <|im_start|>


def chat_text(text: str, images: int = 0, template: str | None = None) -> str:
    """The prompt as ComfyUI's Krea2Tokenizer formats it with pictures or a caller's chat template (the
    Qwen-Image-Edit encoders pass theirs): Krea's own template with a vision block per picture before the
    prompt, unless a template is given; a prompt that opens a chat turn itself is taken as it is."""
    if text.startswith("<|im_start|>"):
        return text
    if template is None:
        template = PREFIX + VISION_BLOCK * images + "{}" + SUFFIX
    return template.format(text)


def prompt_start(ids: Sequence[int]) -> int:
    """Where the conditioning starts, as ComfyUI's Krea 2 encoder finds it: at the second <|im_start|>, past
    its "user\n" where that follows."""
    starts = [i for i, t in enumerate(ids) if t == IM_START][:2]
    if not starts:
        return 0
    at = starts[-1]
    if tuple(ids[at + 1 : at + 3]) == (USER, NEWLINE):
        at += 3
    return at


def tapped_layers(num_layers: int) -> tuple[int, ...]:
    """The hidden-state indices Krea 2 stacks: every third from 2 below the layer count (2..35 of 36)."""
    return tuple(range(2, num_layers, 3))


@dataclass
class Krea2TextEncoder(TextEncoder):
    tokenizer: QwenTokenizer | None = None

    def tokenize(
        self, text: str, images: int = 0, template: str | None = None
    ) -> dict[str, list[list[tuple[int, float]]]]:
        """Krea's chat turn around the prompt; `images` (how many pictures encode() will be given) or a chat
        `template` (the Qwen-Image-Edit encoders') make it one string as ComfyUI's Krea2Tokenizer does."""
        if images or template is not None:
            ids = self.tokenizer.encode(unescape_parens(escape_parens(chat_text(text, images, template))))
        else:  # as diffusers' pipeline: the suffix tokenized apart (the same ids for every prompt tried)
            plain = unescape_parens(escape_parens(text))  # no weighting syntax, as for the other Qwen encoders
            ids = self.tokenizer.encode(PREFIX + plain) + self.tokenizer.encode(SUFFIX)
        return {SUB: [[(t, 1.0) for t in ids]]}

    @torch.no_grad()
    def encode(
        self, tokens: dict[str, list[list[tuple[int, float]]]], images: Sequence[torch.Tensor] = ()
    ) -> tuple[torch.Tensor, None]:
        """The tapped layers' states [1, T, L*D] from the prompt's start on; each IMAGE of `images` is read by
        the vision tower into the next <|image_pad|>, its tokens kept in the conditioning."""
        ids = [t for chunk in tokens[SUB] for t, _ in chunk]
        model = self.modules[SUB]
        embeds, placed, seen = embed_with_images(self.modules, SUB, ids, images)
        kwargs, _, _ = vision_inputs(embeds, placed, seen)
        taps = tapped_layers(len(model.layers))
        # hidden state k is layer k's input: after layer k-1 and its DeepStack add, as ComfyUI records it
        captured: dict[int, torch.Tensor] = {}
        handles = [
            model.layers[k].register_forward_pre_hook(
                lambda module, args, kw, k=k: captured.__setitem__(k, (args[0] if args else kw["hidden_states"])),
                with_kwargs=True,
            )
            for k in taps
        ]
        try:
            model(**kwargs)
        finally:
            for handle in handles:
                handle.remove()
        stack = torch.stack([captured[k] for k in taps], dim=2)
        skip = expanded_index(prompt_start(ids), placed)
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
    sd = dequantize_scaled_fp8(sd)  # qwen3vl_4b_fp8_scaled: weights x scales
    modules = {SUB: build_language_model(sd, path)}
    if has_vision_model(sd):  # the Qwen-Image-Edit encoders' pictures
        modules[VISION] = build_vision_model(sd, path)
    return Krea2TextEncoder(arch="krea2", modules=modules, layer=None, tokenizer=qwen_tokenizer(tokenizer_dirs(), path))
