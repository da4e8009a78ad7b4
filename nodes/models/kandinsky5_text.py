"""Kandinsky 5's text encoders (DualCLIPLoader type kandinsky5 / kandinsky5_image on qwen_2.5_vl_7b*.safetensors and
clip_l.safetensors, in either order), as ComfyUI 0.10.0's comfy/text_encoders/kandinsky5.py reads them:
- Qwen-Image's Qwen2.5-VL language model and tokenization (nodes.models.qwen_image_text), the prompt in Kandinsky's
  own chat template (the video one for kandinsky5, the image one for kandinsky5_image: a system turn and the user
  turn, no assistant turn) unless it is chat text already;
- its states are the last block's output before the final norm (ComfyUI's layer "hidden", index -1; CLIPSetLastLayer
  picks another block), kept from Qwen-Image's template end on;
- CLIP-L reads the prompt as written (weights parsed, windows as long as its position table: 77, or a long CLIP-L's
  248 as comfy/text_encoders/long_clipl.py sets them) and gives the pooled vector beside the
  conditioning: its first window's end-token state after the final norm, unprojected (Flux's CLIP-L pooled output).
ComfyUI holds the whole encoder, CLIP-L too, in the Qwen file's dtype (comfy/sd.py's llama_detect reads it from
`model.norm.weight` or `model.layers.0.input_layernorm.weight`) and computes in float32: a bfloat16 Qwen file rounds
CLIP-L's weights to bfloat16, so they are rounded here the same way (the arithmetic stays float32).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch

from cluster.refs import ModelRef
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.flux_text import CLIP_MARKER, Tokenize, build_clip, clip_rules, find_clip_tokenizer
from nodes.models.flux_tokenize import ChunkRules, encode_weighted, tokenize_weighted
from nodes.models.qwen_image_text import NAME, RAW_PREFIXES, QwenImageTextEncoder, TokenWeights, tokenize_prompt
from nodes.models.qwen_image_text import load_text_encoder as load_qwen_image_text_encoder

LLAMA_DTYPE_KEYS = ("model.norm.weight", "model.layers.0.input_layernorm.weight")  # comfy/sd.py's llama_detect
CLIP = "l"  # ComfyUI's key for CLIP-L's tokens
CLIP_MODULE = "clip_l"
DEFAULT_LAYER = -1  # ComfyUI's Qwen25_7BVLIModel for Kandinsky 5: layer "hidden", layer_idx -1, no final norm
# Kandinsky 5's system prompts (the published pipelines' text): the video models' and the image model's.
VIDEO_TEMPLATE = (
    "<|im_start|>system\nYou are a prompt engineer. Describe the video in detail.\n"
    "Describe how the camera moves or shakes, describe the zoom and view angle, whether it follows the objects.\n"
    "Describe the location of the video, main characters or objects and their action.\n"
    "Describe the dynamism of the video and presented actions.\n"
    "Name the visual style of the video: whether it is a professional footage, user generated content, some kind of "
    "animation, video game or screen content.\n"
    "Describe the visual effects, postprocessing and transitions if they are presented in the video.\n"
    "Pay attention to the order of key actions shown in the scene.<|im_end|>\n<|im_start|>user\n{}<|im_end|>"
)
IMAGE_TEMPLATE = (
    "<|im_start|>system\nYou are a promt engineer. Describe the image by detailing the color, shape, size, texture, "
    "quantity, text, spatial relationships of the objects and background:<|im_end|>\n<|im_start|>user\n{}<|im_end|>"
)
TEMPLATES = {"kandinsky5": VIDEO_TEMPLATE, "kandinsky5_image": IMAGE_TEMPLATE}


@dataclass
class Kandinsky5TextEncoder(QwenImageTextEncoder):
    template: str = VIDEO_TEMPLATE
    clip_tokenizer: Tokenize | None = None
    clip_rules: ChunkRules | None = field(default=None)

    def tokenize(self, text: str, images: int = 0, template: str | None = None) -> dict[str, TokenWeights]:
        if images:
            raise ValueError("clip: the Kandinsky 5 text encoder reads no images")
        chat = text if text.startswith(RAW_PREFIXES) else (template or self.template).format(text)
        return {
            NAME: [[(t, 1.0) for t in tokenize_prompt(chat, self.tokenizer.encode)]],
            CLIP: tokenize_weighted(text, self.clip_tokenizer, self.clip_rules),
        }

    @torch.no_grad()
    def encode(
        self, tokens: dict[str, TokenWeights], images: Sequence[torch.Tensor] = ()
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if images:
            raise ValueError("clip: the Kandinsky 5 text encoder reads no images")
        states, _ = super().encode({NAME: tokens.get(NAME) or []})
        clip = self.modules[CLIP_MODULE]

        def run_clip(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            out = clip(input_ids=ids.to(clip.device))
            return out.last_hidden_state.float(), out.pooler_output.float()

        windows = tokens.get(CLIP) or tokenize_weighted("", self.clip_tokenizer, self.clip_rules)
        _, pooled = encode_weighted(windows, self.clip_rules, run_clip)
        return states, pooled


def held_dtype(qwen_sd: Mapping[str, torch.Tensor]) -> torch.dtype | None:
    """The dtype ComfyUI holds Kandinsky 5's encoders in when the Qwen file says one (its norm weights' float dtype)."""
    for key in LLAMA_DTYPE_KEYS:
        if key in qwen_sd:
            dtype = qwen_sd[key].dtype
            return dtype if dtype in (torch.float16, torch.bfloat16) else None
    return None


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> Kandinsky5TextEncoder:
    """Kandinsky 5's CLIP object from a Qwen2.5-VL file and a CLIP-L file (DualCLIPLoader, either order)."""
    path = ref.sources[0] if ref.sources else None
    sds = [state_dicts] if isinstance(state_dicts, Mapping) else list(state_dicts)
    clips = [(i, sd) for i, sd in enumerate(sds) if find_prefix(sd.keys(), CLIP_MARKER) is not None]
    others = [sd for sd in sds if find_prefix(sd.keys(), CLIP_MARKER) is None]
    if len(clips) != 1 or len(others) != 1:
        raise ModelLoadError(
            path,
            "Kandinsky 5 takes a Qwen2.5-VL text encoder and a CLIP-L text encoder "
            f"({len(others)} other and {len(clips)} CLIP files were given)",
        )
    qwen = load_qwen_image_text_encoder(ref, others[0])
    index, clip_sd = clips[0]
    clip_path = ref.sources[index] if index < len(ref.sources) else None
    try:
        clip = build_clip(strip_prefix(clip_sd, find_prefix(clip_sd.keys(), CLIP_MARKER)), clip_path, None)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(clip_path, f"not a usable CLIP-L text encoder: {e}") from None
    held = held_dtype(others[0])
    if held is not None:
        with torch.no_grad():
            for p in clip.parameters():
                p.copy_(p.to(held))
    vocab = clip.config.vocab_size
    clip_type = ref.option("clip_type") or "kandinsky5"
    layer = ref.option("layer")
    return Kandinsky5TextEncoder(
        arch="kandinsky5",
        modules={**qwen.modules, CLIP_MODULE: clip},
        layer=DEFAULT_LAYER if layer is None else layer,
        tokenizer=qwen.tokenizer,
        num_layers=qwen.num_layers,
        template=TEMPLATES.get(clip_type, VIDEO_TEMPLATE),
        clip_tokenizer=find_clip_tokenizer(clip_path, vocab, None),
        # ComfyUI's long_clipl rule: windows as long as the file's position table (a long CLIP-L's 248)
        clip_rules=dataclasses.replace(clip_rules(vocab), max_length=clip.config.max_position_embeddings),
    )


__all__ = ["IMAGE_TEMPLATE", "VIDEO_TEMPLATE", "Kandinsky5TextEncoder", "load_text_encoder"]
