"""Hunyuan Image 2.1's text encoder (CLIPLoader type hunyuan_image on text_encoders/qwen_2.5_vl_7b*.safetensors):
Qwen-Image's Qwen2.5-VL language model (nodes.models.qwen_image_text), read as ComfyUI 0.3.64's
comfy/text_encoders/hunyuan_image.py reads it for one file (te(byt5=False)):
- the prompt goes into Hunyuan Image's template (Qwen-Image's system turn and user turn, without the assistant turn),
  unless it is chat text already; the rest of the tokenization is Qwen-Image's;
- the states are the output of the third block from the end (ComfyUI's layer "hidden", index -3, no final norm;
  CLIPSetLastLayer picks another block);
- they are kept from Qwen-Image's template end on, except for a prompt whose first token is `<` (27) that is longer
  than 36 tokens (the refiner's own chat text), which is cut at 36.
The ByT5 glyph encoder (DualCLIPLoader type hunyuan_image, its quoted-text tokens) is not supported yet.
"""

from __future__ import annotations

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

TEMPLATE = (
    "<|im_start|>system\nDescribe the image by detailing the color, shape, size, texture, quantity, text, "
    "spatial relationships of the objects and background:<|im_end|>\n<|im_start|>user\n{}<|im_end|>"
)
DEFAULT_LAYER = -3  # ComfyUI's Qwen25_7BVLIModel for Hunyuan Image: layer "hidden", layer_idx -3
LT_ID = 27  # "<": a prompt that starts with it (and is not <|im_start|>) is taken as the refiner's chat text
REFINER_TEMPLATE_END = 36


@dataclass
class HunyuanImageTextEncoder(QwenImageTextEncoder):
    def tokenize(self, text: str, images: int = 0, template: str | None = None) -> dict[str, TokenWeights]:
        if images:
            raise ValueError("clip: the Hunyuan Image 2.1 text encoder reads no images")
        if not text.startswith(RAW_PREFIXES):
            text = (template or TEMPLATE).format(text)
        return {NAME: [[(t, 1.0) for t in tokenize_prompt(text, self.tokenizer.encode)]]}

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
    """Hunyuan Image 2.1's CLIP object from one qwen_2.5_vl_7b file (CLIPLoader type hunyuan_image)."""
    path = ref.sources[0] if ref.sources else None
    if not isinstance(state_dicts, Mapping):
        if len(state_dicts) != 1:
            raise ModelLoadError(
                path,
                "Hunyuan Image 2.1 with the ByT5 glyph encoder (DualCLIPLoader type hunyuan_image) is not supported "
                "yet; load the Qwen2.5-VL file alone with CLIPLoader type hunyuan_image",
            )
        state_dicts = state_dicts[0]
    qwen = load_qwen_image_text_encoder(ref, state_dicts)
    layer = ref.option("layer")
    return HunyuanImageTextEncoder(
        arch="hunyuan_image",
        modules=qwen.modules,
        layer=DEFAULT_LAYER if layer is None else layer,
        tokenizer=qwen.tokenizer,
        num_layers=qwen.num_layers,
    )


__all__ = ["HunyuanImageTextEncoder", "load_text_encoder"]
