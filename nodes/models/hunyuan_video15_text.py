"""HunyuanVideo 1.5's text encoder (DualCLIPLoader type hunyuan_video_15 on qwen_2.5_vl_7b*.safetensors and
byt5_small_glyphxl_fp16.safetensors): Hunyuan Image 2.1's reading of Qwen2.5-VL (nodes.models.hunyuan_image_text:
the third block from the end, Qwen-Image's template cut) with the tokenizer ComfyUI 0.10.0's
comfy/text_encoders/hunyuan_video.py gives it (HunyuanVideo15Tokenizer): the video-describing system turn, the user
turn and an open assistant turn, an empty prompt read as one space.

ComfyUI encodes a prompt's quoted text ("...", ‘...’, “...”) with the ByT5 glyph encoder as well; that is not
supported yet, so such a prompt is refused by name (the ByT5 file is accepted and checked for its layout, as the
templates load it, and not read otherwise).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from cluster.refs import ModelRef
from nodes.models.errors import ModelLoadError
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
QUOTED = re.compile(r"\"(.*?)\"|\u2018(.*?)\u2019|\u201c(.*?)\u201d")  # the quotes ComfyUI hands to ByT5
BYT5_MARKER = "encoder.block.0.layer.0.SelfAttention.o.weight"


@dataclass
class HunyuanVideo15TextEncoder(HunyuanImageTextEncoder):
    def tokenize(self, text: str, images: int = 0, template: str | None = None) -> dict[str, TokenWeights]:
        if QUOTED.search(text):
            raise ValueError(
                "clip: quoted text in a HunyuanVideo 1.5 prompt goes to the ByT5 glyph encoder, which is not "
                "supported yet; write the prompt without quotes"
            )
        return super().tokenize(text or " ", images, template or TEMPLATE)


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> HunyuanVideo15TextEncoder:
    """HunyuanVideo 1.5's CLIP object from its Qwen2.5-VL file and (optionally) its ByT5 file, in either order."""
    path = ref.sources[0] if ref.sources else None
    sds = [state_dicts] if isinstance(state_dicts, Mapping) else list(state_dicts)
    qwen = [sd for sd in sds if not any(k.endswith(BYT5_MARKER) for k in sd)]
    if len(qwen) != 1 or len(sds) > 2:
        raise ModelLoadError(
            path,
            "DualCLIPLoader type hunyuan_video_15 loads one Qwen2.5-VL file (qwen_2.5_vl_7b*.safetensors) and the "
            "ByT5 glyph encoder (byt5_small_glyphxl_fp16.safetensors)",
        )
    base = load_hunyuan_image_text_encoder(ref, qwen[0])
    return HunyuanVideo15TextEncoder(
        arch="hunyuan_video15",
        modules=base.modules,
        layer=base.layer,
        tokenizer=base.tokenizer,
        num_layers=base.num_layers,
    )


__all__ = ["HunyuanVideo15TextEncoder", "load_text_encoder"]
