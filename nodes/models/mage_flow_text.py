"""Mage-Flow's text encoder: Qwen3-VL-4B (CLIPLoader type mage, text_encoders/qwen3vl_4b_bf16.safetensors in
transformers' Qwen3VLForConditionalGeneration names), with its vision tower for the edit models' reference images.

As the newest ComfyUI source encodes a prompt for it (comfy/text_encoders/mage_flow.py on qwen3vl.py):
- without images the prompt goes into Mage's text-to-image chat template (Qwen-Image's system prompt), with images
  into its edit template (Qwen-Image-Edit's system prompt) after "Image 1: " + a vision block, "Image 2: " + ...;
  no weighting syntax ("\\(" reads "("), no thinking block;
- the conditioning is the last decoder layer's output with the final norm applied (the language model's last
  hidden state), the image tokens kept, everything before the second <|im_start|> and its "user" and newline
  tokens dropped; no pooled vector, no mask (one prompt has none).
The vision tower reads each picture as for Qwen-Image 2.1 (nodes.models.qwen3vl_vision); TextEncodeMageFlowEdit
shrinks them to a 384-pixel long edge first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from cluster.refs import ModelRef
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix
from nodes.models.qwen3vl_vision import build_vision_model, has_vision_model
from nodes.models.qwen_image21_text import (
    IM_START,
    LM_MARKER,
    VISION,
    VISION_BLOCK,
    QwenImage21TextEncoder,
    build_language_model,
    expanded_index,
)
from nodes.models.qwen_image21_text import (
    SUB as QWEN21_SUB,
)
from nodes.models.qwen_tokenizer import qwen_tokenizer
from nodes.models.tokenizer import escape_parens, unescape_parens
from nodes.models.zimage_text import tokenizer_dirs

SUB = "qwen3vl_4b"  # ComfyUI's name for the sub-encoder (its token dict key)
T2I = (
    "<|im_start|>system\nDescribe the image by detailing the color, shape, size, texture, quantity, text, spatial "
    "relationships of the objects and background:<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
)
EDIT = (
    "<|im_start|>system\nDescribe the key features of the input image (color, shape, size, texture, objects, "
    "background), then explain how the user's text instruction should alter or modify the image. Generate a new "
    "image that meets the user's requirements while maintaining consistency with the original input where "
    "appropriate.<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
)
USER, NEWLINE = 872, 198  # the "user" and "\n" tokens after the second <|im_start|>


def chat_text(text: str, images: int = 0) -> str:
    """The prompt as ComfyUI's MageFlowTokenizer hands it to the tokenizer (a prompt that starts with
    <|im_start|> is chat text already)."""
    if text.startswith("<|im_start|>"):
        return text
    if not images:
        return T2I.format(text)
    refs = "".join(f"Image {j}: {VISION_BLOCK}" for j in range(1, images + 1))
    return EDIT.format(refs + text)


def template_end(ids: Sequence[int]) -> int:
    """How many leading tokens ComfyUI's Mage-Flow encoder drops: up to the second <|im_start|> (the first when
    there is one; -1, the last token only, when there is none) and its "user" and newline tokens."""
    starts = [i for i, t in enumerate(ids) if t == IM_START][:2]
    end = starts[-1] if starts else -1
    if len(ids) > end + 3 and ids[end + 1] == USER and ids[end + 2] == NEWLINE:
        end += 3
    return end


@dataclass
class MageFlowTextEncoder(QwenImage21TextEncoder):
    def tokenize(
        self, text: str, images: int = 0, template: str | None = None
    ) -> dict[str, list[list[tuple[int, float]]]]:
        """`images`: how many pictures encode() will be given."""
        if template is not None:
            raise ValueError("Mage-Flow's text encoder builds its own chat template; none can be given")
        plain = unescape_parens(escape_parens(chat_text(text, images)))
        return {SUB: [[(t, 1.0) for t in self.tokenizer.encode(plain)]]}

    @torch.no_grad()
    def encode(
        self, tokens: dict[str, list[list[tuple[int, float]]]], images: Sequence[torch.Tensor] = ()
    ) -> tuple[torch.Tensor, None]:
        ids = [t for chunk in tokens[SUB] for t, _ in chunk]
        states, placed = self.read_with_images(ids, images)
        states = self.modules[QWEN21_SUB].norm(states)
        end = template_end(ids)
        start = expanded_index(end, placed) if end >= 0 else states.shape[1] - 1
        return states[:, start:].float(), None

    def encode_with_slots(self, tokens, images=(), keep_vision=True):
        raise ValueError("Mage-Flow keeps the images' tokens in its conditioning; there are no image slots")


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> MageFlowTextEncoder:
    """Mage-Flow's CLIP object from CLIPLoader's Qwen3-VL file (its vision tower too, where it has one)."""
    if isinstance(state_dicts, Mapping):
        state_dicts = [state_dicts]
    path = ref.sources[0] if ref.sources else None
    sd = next((s for s in state_dicts if find_prefix(s.keys(), LM_MARKER) is not None), None)
    if sd is None:
        raise ModelLoadError(path, "Mage-Flow needs a Qwen3-VL text encoder (qwen3vl_4b_bf16.safetensors); none found")
    # ComfyUI computes its text encoders in float32 whatever the file's dtype (sd1_clip's dtype=torch.float32)
    sd = {k: v.float() if v.is_floating_point() else v for k, v in sd.items()}
    modules = {QWEN21_SUB: build_language_model(sd, path)}
    if has_vision_model(sd):
        modules[VISION] = build_vision_model(sd, path)
    return MageFlowTextEncoder(
        arch="mage_flow", modules=modules, layer=None, tokenizer=qwen_tokenizer(tokenizer_dirs(), path)
    )
