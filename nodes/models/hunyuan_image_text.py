"""Hunyuan Image 2.1's text encoder (CLIPLoader type hunyuan_image on text_encoders/qwen_2.5_vl_7b*.safetensors):
Qwen-Image's Qwen2.5-VL language model (nodes.models.qwen_image_text), read as ComfyUI 0.3.64's
comfy/text_encoders/hunyuan_image.py reads it for one file (te(byt5=False)):
- the prompt goes into Hunyuan Image's template (Qwen-Image's system turn and user turn, without the assistant turn),
  unless it is chat text already; the rest of the tokenization is Qwen-Image's;
- the states are the output of the third block from the end (ComfyUI's layer "hidden", index -3, no final norm;
  CLIPSetLastLayer picks another block);
- they are kept from Qwen-Image's template end on, except for a prompt whose first token is `<` (27) that is longer
  than 36 tokens (the refiner's own chat text), which is cut at 36.
With the ByT5 glyph encoder beside it (DualCLIPLoader type hunyuan_image; byt5_small_glyphxl, T5 names), the text
inside double, Chinese single and Chinese double quotes (in that order) becomes `Text "...". ` pieces, tokenized as
bytes + 3 with the end token 1 (ComfyUI's ByT5SmallTokenizer through its SDTokenizer: weights parsed, so a weighted
piece is refused here), and the ByT5 encoder's last states go beside the conditioning as `conditioning_byt5small`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from cluster.refs import ModelRef
from nodes.models.errors import ModelLoadError
from nodes.models.qwen_image_text import (
    NAME,
    RAW_PREFIXES,
    QwenImageTextEncoder,
    TokenWeights,
    attention_mask,
    template_end,
    tokenize_prompt,
)
from nodes.models.qwen_image_text import load_text_encoder as load_qwen_image_text_encoder
from nodes.models.qwen_tokenizer import ENDOFTEXT_ID
from nodes.models.t5 import build_t5, t5_hidden_states
from nodes.models.tokenizer import escape_parens, parse_weights, unescape_parens

TEMPLATE = (
    "<|im_start|>system\nDescribe the image by detailing the color, shape, size, texture, quantity, text, "
    "spatial relationships of the objects and background:<|im_end|>\n<|im_start|>user\n{}<|im_end|>"
)
DEFAULT_LAYER = -3  # ComfyUI's Qwen25_7BVLIModel for Hunyuan Image: layer "hidden", layer_idx -3
LT_ID = 27  # "<": a prompt that starts with it (and is not <|im_start|>) is taken as the refiner's chat text
REFINER_TEMPLATE_END = 36
BYT5 = "byt5"  # ComfyUI's key for the glyph encoder's tokens
BYT5_MARKER = "encoder.block.0.layer.0.SelfAttention.o.weight"  # ComfyUI's test for a ByT5 file among the two
BYT5_STATES = "conditioning_byt5small"
BYT5_END, BYTE_OFFSET = 1, 3
QUOTES = (re.compile(r'"(.*?)"'), re.compile("\u2018(.*?)\u2019"), re.compile("\u201c(.*?)\u201d"))


def glyph_text(prompt: str) -> str | None:
    """The ByT5 encoder's text: every quoted piece as `Text "piece". `, or None when the prompt quotes nothing."""
    pieces = [m for quote in QUOTES for m in quote.findall(prompt)]
    return "".join(f'Text "{p}". ' for p in pieces) if pieces else None


def byt5_ids(text: str) -> list[int]:
    """ByT5's ids of `text` (UTF-8 bytes + 3) and the end token, as ComfyUI's SDTokenizer makes them."""
    segments = parse_weights(escape_parens(text))
    if any(w != 1.0 for _, w in segments):
        raise NotImplementedError(
            "clip: weighted text inside quotes (the ByT5 glyph encoder's input) is not supported yet"
        )
    data = "".join(unescape_parens(seg) for seg, _ in segments).encode("utf-8")
    return [b + BYTE_OFFSET for b in data] + [BYT5_END]


@dataclass
class HunyuanImageTextEncoder(QwenImageTextEncoder):
    def tokenize(self, text: str, images: int = 0, template: str | None = None) -> dict[str, TokenWeights]:
        if images:
            raise ValueError("clip: the Hunyuan Image 2.1 text encoder reads no images")
        glyphs = glyph_text(text)  # from the prompt as written, before the template
        if not text.startswith(RAW_PREFIXES):
            text = (template or TEMPLATE).format(text)
        tokens = {NAME: [[(t, 1.0) for t in tokenize_prompt(text, self.tokenizer.encode)]]}
        if glyphs is not None:
            tokens[BYT5] = [[(t, 1.0) for t in byt5_ids(glyphs)]]
        return tokens

    @torch.no_grad()
    def extras(self, tokens: dict[str, TokenWeights]) -> dict[str, torch.Tensor]:
        """The ByT5 encoder's states of the quoted text, when there is an encoder and a quote (ComfyUI's key)."""
        byt5 = self.modules.get(BYT5)
        if byt5 is None or not tokens.get(BYT5):
            return {}
        ids = torch.tensor([[int(t) for t, _ in tokens[BYT5][0]]], device=next(byt5.parameters()).device)
        return {BYT5_STATES: t5_hidden_states(byt5, ids).float()}

    @torch.no_grad()
    def encode(self, tokens: dict[str, TokenWeights], images: Sequence[torch.Tensor] = ()) -> tuple[torch.Tensor, None]:
        if images:
            raise ValueError("clip: the Hunyuan Image 2.1 text encoder reads no images")
        chunks = tokens.get(NAME) or [[(ENDOFTEXT_ID, 1.0)]]
        ids = [int(t) for chunk in chunks for t, _ in chunk]
        module = self.modules[NAME]
        embeds = module.embed_tokens(torch.tensor([ids], device=next(module.parameters()).device)).float()
        states = self.hidden_states(embeds, attention_mask(ids), None)
        first = [int(t) for t, _ in chunks[0]]
        if first[0] == LT_ID and len(first) > REFINER_TEMPLATE_END:
            end = REFINER_TEMPLATE_END
        else:
            end = template_end(first, states.shape[1])
        return states[:, end:], None


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> HunyuanImageTextEncoder:
    """Hunyuan Image 2.1's CLIP object from a qwen_2.5_vl_7b file (CLIPLoader type hunyuan_image), with the ByT5
    glyph encoder when a second file is one (DualCLIPLoader type hunyuan_image, in either order)."""
    path = ref.sources[0] if ref.sources else None
    sds = [state_dicts] if isinstance(state_dicts, Mapping) else list(state_dicts)
    glyphs = [sd for sd in sds if BYT5_MARKER in sd]
    others = [sd for sd in sds if BYT5_MARKER not in sd]
    if len(others) != 1 or len(glyphs) > 1:
        raise ModelLoadError(
            path,
            "Hunyuan Image 2.1 takes one Qwen2.5-VL text encoder and at most one ByT5 glyph encoder "
            f"({len(others)} other and {len(glyphs)} ByT5 files were given)",
        )
    qwen = load_qwen_image_text_encoder(ref, others[0])
    modules = dict(qwen.modules)
    if glyphs:
        try:
            modules[BYT5] = build_t5(glyphs[0], path).float()  # ComfyUI runs text encoders in float32 on a CPU
        except (KeyError, ValueError) as e:
            raise ModelLoadError(path, f"not a usable ByT5 glyph encoder: {e}") from None
    layer = ref.option("layer")
    return HunyuanImageTextEncoder(
        arch="hunyuan_image",
        modules=modules,
        layer=DEFAULT_LAYER if layer is None else layer,
        tokenizer=qwen.tokenizer,
        num_layers=qwen.num_layers,
    )


__all__ = ["HunyuanImageTextEncoder", "byt5_ids", "glyph_text", "load_text_encoder"]
