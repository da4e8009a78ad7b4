"""HunyuanVideo 1.0's text encoders (DualCLIPLoader type hunyuan_video on clip_l.safetensors and
llava_llama3_fp8_scaled.safetensors, in either order), as ComfyUI 0.3.64's comfy/text_encoders/hunyuan_video.py reads
them:
- the Llama (llava-llama3 8B's language model; ComfyUI's scaled fp8 multiplied out) reads the prompt inside
  HunyuanVideo's video template (a system turn, then the user turn), tokenized with Llama 3's BPE and the template's
  special tokens (<|begin_of_text|> first, no padding: one window). Its states are the output of the third block
  from the end, before the final norm (ComfyUI's layer "hidden", index -3), kept from after the user header's
  "\\n\\n" through the user turn's <|eot_id|>;
- CLIP-L reads the prompt as written (weights parsed; windows as long as its position table, ComfyUI's long_clipl
  rule) and gives its unprojected pooled vector beside the conditioning.
A token weight w != 1 moves that token's state away from the empty prompt's (<|begin_of_text|> then pad 128258), as
ComfyUI's SDClipModel does. The Llama runs on transformers' LlamaModel (nodes.models.hidream_text).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from cluster.refs import ModelRef
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.flux_text import CLIP_MARKER, Tokenize, build_clip, clip_rules, find_clip_tokenizer
from nodes.models.flux_tokenize import ChunkRules, encode_weighted, tokenize_weighted
from nodes.models.fp8 import dequantize_scaled_fp8
from nodes.models.hidream_text import build_llama, is_llama, pad_mask
from nodes.models.tokenizer import TokenWeights

BEGIN, PAD, IMAGE = 128000, 128258, 128257  # <|begin_of_text|>, llava-llama3's <pad> and <image>
HEADER_START, HEADER_END, EOT, USER, DOUBLE_NEWLINE = 128006, 128007, 128009, 882, 271
LLAMA_RULES = ChunkRules(start=BEGIN, end=None, pad=PAD, max_length=99_999_999, pad_to_max_length=False, min_length=1)
DEFAULT_LAYER = -3  # ComfyUI's LLAMAModel: layer "hidden", layer_idx -3
LLAMA, CLIP, INTERLEAVE = "llama", "l", "image_interleave"
# HunyuanVideo's image-to-video template (TextEncodeHunyuanVideo_ImageToVideo's; the published pipeline's text).
I2V_TEMPLATE = (
    "<|start_header_id|>system<|end_header_id|>\n\n<image>\nDescribe the video by detailing the following aspects "
    "according to the reference image: 1. The main content and theme of the video.2. The color, shape, size, texture, "
    "quantity, text, and spatial relationships of the objects.3. Actions, events, behaviors temporal relationships, "
    "physical movement changes of the objects.4. background environment, light, style and atmosphere.5. camera "
    "angles, movements, and transitions used in the video:<|eot_id|>\n\n<|start_header_id|>user<|end_header_id|>"
    "\n\n{}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
)
# HunyuanVideo's prompt template for text-to-video (the published pipeline's text).
VIDEO_TEMPLATE = (
    "<|start_header_id|>system<|end_header_id|>\n\nDescribe the video by detailing the following aspects: "
    "1. The main content and theme of the video.2. The color, shape, size, texture, quantity, text, and spatial "
    "relationships of the objects.3. Actions, events, behaviors temporal relationships, physical movement changes "
    "of the objects.4. background environment, light, style and atmosphere.5. camera angles, movements, and "
    "transitions used in the video:<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n{}<|eot_id|>"
)


def llama3_encode() -> Callable[[str], list[int]]:
    """Llama 3's BPE (quicktok-v1) reading its special tokens, and llava-llama3's <image> as 128257."""
    try:
        import quicktok
    except ImportError as e:
        raise ValueError(f"HunyuanVideo's Llama 3 tokenizer needs the quicktok-v1 package ({e})") from None
    enc = quicktok.get_encoding("llama3")

    def encode(text: str) -> list[int]:
        out: list[int] = []
        for i, part in enumerate(text.split("<image>")):
            if i:
                out.append(IMAGE)
            if part:
                out.extend(enc.encode_with_special_tokens(part))
        return out

    return encode


def template_span(ids: Sequence[int]) -> tuple[int, int]:
    """ComfyUI's cut of the Llama states: from after the user header (and its "\\n\\n") through the user turn's
    <|eot_id|>; the whole sequence when there is no user header."""
    start, end = 0, None
    for i, t in enumerate(ids):
        if t == HEADER_START and i + 2 < len(ids) and ids[i + 1] == USER and ids[i + 2] == HEADER_END:
            start, end = i + 2, -1
        elif t == EOT and end == -1:
            end = i + 1
    if len(ids) > start + 2 and ids[start + 1] == DOUBLE_NEWLINE:
        start += 2
    return start, (len(ids) if end in (None, -1) else end)


@dataclass
class HunyuanVideoTextEncoder(TextEncoder):
    llama_encode: Callable[[str], list[int]] | None = None
    clip_tokenizer: Tokenize | None = None
    clip_rules: ChunkRules | None = field(default=None)
    template: str = VIDEO_TEMPLATE

    def tokenize(
        self, text: str, images: int = 0, template: str | None = None, image_interleave: int = 1
    ) -> dict[str, TokenWeights]:
        chat = (template or self.template).format(text)
        out = {
            CLIP: tokenize_weighted(text, self.clip_tokenizer, self.clip_rules),
            LLAMA: tokenize_weighted(chat, self.llama_encode, LLAMA_RULES),
        }
        if images:  # TextEncodeHunyuanVideo_ImageToVideo: every image-th state of the image's tokens kept
            out[INTERLEAVE] = [[(int(image_interleave), 1.0)]]
        return out

    @torch.no_grad()
    def encode(
        self, tokens: dict[str, TokenWeights], images: Sequence[torch.Tensor] = ()
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if images:
            return self._encode_with_image(tokens, images)
        llama = self.modules[LLAMA]
        layer = DEFAULT_LAYER if self.layer is None else self.layer
        if layer >= 0 or -layer > llama.config.num_hidden_layers:
            raise ValueError(
                f"clip: layer {layer} is not a hidden layer of this {llama.config.num_hidden_layers}-block Llama"
            )

        if layer == -1:
            raise ValueError("clip: layer -1 (the last block before its norm) is not offered for HunyuanVideo yet")

        def run_llama(ids: torch.Tensor) -> tuple[torch.Tensor, None]:
            device = llama.embed_tokens.weight.device
            # ComfyUI's mask: each row attended up to its first pad token (the empty prompt's, for token weights)
            mask = torch.tensor([pad_mask(row, PAD) for row in ids.tolist()], dtype=torch.long, device=device)
            out = llama(input_ids=ids.to(device), attention_mask=mask, output_hidden_states=True, use_cache=False)
            # hidden_states: the embedding, then each block's output, the last one final-normed: ComfyUI's block
            # index `layer` (< -1, before any norm) is entry `layer` of that list
            return out.hidden_states[layer].float(), None

        windows = tokens.get(LLAMA) or tokenize_weighted("", self.llama_encode, LLAMA_RULES)
        states, _ = encode_weighted(windows, LLAMA_RULES, run_llama)
        start, end = template_span([t for t, _ in windows[0]])
        cond = states[:, start:end]
        clip = self.modules["clip_l"]

        def run_clip(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            out = clip(input_ids=ids.to(clip.device))
            return out.last_hidden_state.float(), out.pooler_output.float()

        clip_windows = tokens.get(CLIP) or tokenize_weighted("", self.clip_tokenizer, self.clip_rules)
        _, pooled = encode_weighted(clip_windows, self.clip_rules, run_clip)
        return cond, pooled

    def _clip_pooled(self, tokens: dict[str, TokenWeights]) -> torch.Tensor:
        clip = self.modules["clip_l"]

        def run_clip(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            out = clip(input_ids=ids.to(clip.device))
            return out.last_hidden_state.float(), out.pooler_output.float()

        clip_windows = tokens.get(CLIP) or tokenize_weighted("", self.clip_tokenizer, self.clip_rules)
        return encode_weighted(clip_windows, self.clip_rules, run_clip)[1]

    def _encode_with_image(
        self, tokens: dict[str, TokenWeights], images: Sequence[torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """ComfyUI's image-to-video prompt: the k-th <image> token (k < the projected images' batch) replaced by that
        image's projected tokens in the Llama's input; the states cut from after the user header as without an image
        (the positions moved by the inserted rows), the image's states (every image_interleave-th) put first."""
        if len(images) != 1:
            raise ValueError(
                f"clip: TextEncodeHunyuanVideo_ImageToVideo reads one CLIP vision output, got {len(images)}"
            )
        embeds = images[0]
        if embeds is None:
            raise ValueError(
                "clip_vision_output: it has no projected image tokens (mm_projected): load llava-llama3's vision "
                "file (llava_llama3_vision) with CLIPVisionLoader"
            )
        windows = tokens.get(LLAMA) or []
        if len(windows) != 1 or any(w != 1.0 for _, w in windows[0]):
            raise ValueError("clip: token weights are not read in an image-to-video prompt (ComfyUI fails on them)")
        (interleave,) = (t for t, _ in tokens[INTERLEAVE][0])
        ids = [t for t, _ in windows[0]]
        llama = self.modules[LLAMA]
        device = llama.embed_tokens.weight.device
        width = llama.config.hidden_size
        if embeds.shape[-1] != width:
            raise ValueError(f"clip_vision_output: its image tokens are {embeds.shape[-1]} wide, the Llama {width}")
        table = llama.embed_tokens(torch.tensor([ids], device=device))[0].float()
        start, end = template_span(ids)
        rows, spans, used, shift = [], [], 0, 0
        for i, t in enumerate(ids):
            if t == IMAGE and used < embeds.shape[0]:
                if i >= start:
                    raise ValueError("clip: an <image> token in the user's turn is not read (only the template's)")
                image = embeds[used].to(device, torch.float32).reshape(-1, width)
                spans.append((i + shift, i + shift + image.shape[0]))
                rows.append(image)
                shift += image.shape[0] - 1
                used += 1
            else:
                rows.append(table[i : i + 1])
        states = llama(inputs_embeds=torch.cat(rows)[None], output_hidden_states=True, use_cache=False)
        layer = DEFAULT_LAYER if self.layer is None else self.layer
        if layer >= -1:
            raise ValueError(f"clip: layer {layer} is not offered for HunyuanVideo")
        hidden = states.hidden_states[layer].float()
        kept = [hidden[:, a:b:interleave] for a, b in spans]
        cond = torch.cat([*kept, hidden[:, start + shift : end + shift]], dim=1)
        return cond, self._clip_pooled(tokens)


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> HunyuanVideoTextEncoder:
    """HunyuanVideo's CLIP object from a llava-llama3 file and a CLIP-L file (DualCLIPLoader, either order)."""
    path = ref.sources[0] if ref.sources else None
    if ref.patches:
        raise ModelLoadError(path, "LoRAs on HunyuanVideo text encoders are not supported yet")
    sds = [state_dicts] if isinstance(state_dicts, Mapping) else list(state_dicts)
    sds = [dequantize_scaled_fp8(sd) for sd in sds]
    clips = [(i, sd) for i, sd in enumerate(sds) if find_prefix(sd.keys(), CLIP_MARKER) is not None]
    llamas = [(i, sd) for i, sd in enumerate(sds) if is_llama(sd)]
    if len(clips) != 1 or len(llamas) != 1 or len(sds) != 2:
        raise ModelLoadError(
            path,
            "HunyuanVideo takes a llava-llama3 text encoder and a CLIP-L text encoder "
            f"({len(llamas)} Llama and {len(clips)} CLIP files among {len(sds)} were given)",
        )

    def source(i: int) -> str | None:
        return ref.sources[i] if i < len(ref.sources) else None

    (ci, clip_sd), (li, llama_sd) = clips[0], llamas[0]
    try:
        clip = build_clip(strip_prefix(clip_sd, find_prefix(clip_sd.keys(), CLIP_MARKER)), source(ci), None)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(source(ci), f"not a usable CLIP-L text encoder: {e}") from None
    llama = build_llama(llama_sd, source(li))
    vocab = clip.config.vocab_size
    return HunyuanVideoTextEncoder(
        arch="hunyuan_video",
        modules={LLAMA: llama, "clip_l": clip},
        layer=ref.option("layer"),
        llama_encode=llama3_encode(),
        clip_tokenizer=find_clip_tokenizer(source(ci), vocab, None),
        # ComfyUI's long_clipl rule: windows as long as the file's position table (a long CLIP-L's 248)
        clip_rules=dataclasses.replace(clip_rules(vocab), max_length=clip.config.max_position_embeddings),
    )


__all__ = ["VIDEO_TEMPLATE", "HunyuanVideoTextEncoder", "load_text_encoder", "template_span"]
