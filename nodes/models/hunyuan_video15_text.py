"""HunyuanVideo 1.5's text encoder (DualCLIPLoader type hunyuan_video_15 on qwen_2.5_vl_7b*.safetensors and
byt5_small_glyphxl_fp16.safetensors): Hunyuan Image 2.1's reading of Qwen2.5-VL and of the ByT5 glyph encoder
(nodes.models.hunyuan_image_text: the third block from the end, Qwen-Image's template cut; a prompt's quoted text
through ByT5 beside the conditioning) with the tokenizer ComfyUI 0.10.0's comfy/text_encoders/hunyuan_video.py gives
it (HunyuanVideo15Tokenizer): the video-describing system turn, the user turn and an open assistant turn, an empty
prompt read as one space.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from cluster.refs import ModelRef
from nodes.models.hunyuan_image_text import HunyuanImageTextEncoder, TokenWeights
from nodes.models.hunyuan_image_text import load_text_encoder as load_hunyuan_image_text_encoder

TEMPLATE = (
    "<|im_start|>system\nYou are a helpful assistant. Describe the video by detailing the following aspects:\n"
    "1. The main content and theme of the video.\n"
    "2. The color, shape, size, texture, quantity, text, and spatial relationships of the objects.\n"
    "3. Actions, events, behaviors temporal relationships, physical movement changes of the objects.\n"
    "4. background environment, light, style and atmosphere.\n"
    "5. camera angles, movements, and transitions used in the video.<|im_end|>\n"
    "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
)


@dataclass
class HunyuanVideo15TextEncoder(HunyuanImageTextEncoder):
    def tokenize(self, text: str, images: int = 0, template: str | None = None) -> dict[str, TokenWeights]:
        return super().tokenize(text or " ", images, template or TEMPLATE)


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> HunyuanVideo15TextEncoder:
    """HunyuanVideo 1.5's CLIP object from its Qwen2.5-VL file and (optionally) its ByT5 file, in either order."""
    base = load_hunyuan_image_text_encoder(ref, state_dicts)
    return HunyuanVideo15TextEncoder(
        arch="hunyuan_video15",
        modules=base.modules,
        layer=base.layer,
        tokenizer=base.tokenizer,
        num_layers=base.num_layers,
    )


__all__ = ["HunyuanVideo15TextEncoder", "load_text_encoder"]
