"""MiniMax H3's text encoder: Qwen3-VL-32B truncated to 50 decoder layers (CLIPLoader type minimax, ComfyUI's file
qwen3vl_32b_minimax_h3*.safetensors in transformers' Qwen3VLForConditionalGeneration names).

As the newest ComfyUI source encodes a prompt for it (comfy/text_encoders/minimax.py): no chat template and no
special tokens, the raw prompt's Qwen2 ids (weighting syntax off, an empty prompt with no image read as the pad
token <|endoftext|>), and the conditioning is the last layer's output before the final norm, i.e. the state after
layer 50 (diffusers' MiniMax H3 pipeline reads hidden_states[50] of the untruncated model: the same tensor).

First/last-frame video (fl2va) puts each keyframe before the prompt as "<Picture i>: " and a vision block:
<|vision_start|>, the picture's tokens from the file's Qwen3-VL vision tower (nodes.models.qwen3vl_vision),
<|vision_end|>. The picture's tokens take Qwen-VL's 3-axis rotary positions and its DeepStack features join their
states after the first decoder layers. Each conditioning row carries a modality tag for the transformer: a vision
block's rows (its start and end tokens included) are video rows (0), the rest text (1). MiniMax's extra special
tokens (<d>, <|cutoff|>, ...), reference videos and audio labels (ref2va) are not parsed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from cluster.refs import ModelRef
from nodes.models import qwen3vl_vision
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix
from nodes.models.qwen_image21_text import LM_MARKER, build_language_model
from nodes.models.qwen_tokenizer import QwenTokenizer, qwen_tokenizer
from nodes.models.tokenizer import escape_parens, unescape_parens
from nodes.models.zimage_text import tokenizer_dirs

SUB = "qwen3vl_32b"  # ComfyUI's name for the sub-encoder (its token dict key)
VISION = "visual"  # the vision tower's key in the encoder's modules
PAD = 151643  # <|endoftext|>: ComfyUI's whole presentation when there is neither prompt nor image
VISION_START, VISION_END = 151652, 151653
IMAGE_PAD = qwen3vl_vision.IMAGE_PAD_ID  # one per picture in the tokens; encode() puts its tokens there
VIDEO_TAG, TEXT_TAG = 0, 1
TokenWeights = list[list[tuple[int, float]]]


@dataclass
class MiniMaxH3TextEncoder(TextEncoder):
    tokenizer: QwenTokenizer | None = None

    def tokenize(self, text: str, images: int = 0, template: str | None = None) -> dict[str, TokenWeights]:
        """The presentation: `images` pictures' labels and vision blocks (one <|image_pad|> each), then the
        prompt. MiniMax H3 takes no chat template."""
        if template is not None:
            raise ValueError("MiniMax H3's text encoder takes no chat template")
        ids: list[int] = []
        for i in range(images):
            ids += self.tokenizer.encode(f"<Picture {i + 1}>: ") + [VISION_START, IMAGE_PAD, VISION_END]
        if text:
            ids += self.tokenizer.encode(unescape_parens(escape_parens(text)))
        return {SUB: [[(t, 1.0) for t in ids or [PAD]]]}

    @torch.no_grad()
    def encode(self, tokens: dict[str, TokenWeights], images: Sequence[torch.Tensor] = ()) -> tuple[torch.Tensor, None]:
        """The conditioning [1, rows, width]; each IMAGE of `images` fills the next <|image_pad|> token."""
        ids = [int(t) for chunk in tokens[SUB] for t, _ in chunk]
        model = self.modules[SUB]
        device = model.embed_tokens.weight.device
        embeds = model.embed_tokens(torch.tensor([ids], device=device))
        placed, deepstack = [], []
        for at, picture in zip(self._slots(ids, images), self._pictures(images)):
            at += sum(p.tokens - 1 for _, p in placed)  # earlier pictures lengthened the sequence
            embeds = torch.cat([embeds[:, :at], picture.embeds[None].to(embeds), embeds[:, at + 1 :]], dim=1)
            placed.append((at, picture))
            deepstack.append(picture.deepstack)
        kwargs = {}
        if placed:
            mask = torch.zeros(1, embeds.shape[1], dtype=torch.bool, device=device)
            for at, picture in placed:
                mask[0, at : at + picture.tokens] = True
            spans = [(at, p.tokens, p.grid) for at, p in placed]
            kwargs = {
                "position_ids": qwen3vl_vision.mrope_positions(embeds.shape[1], spans).to(device),
                "visual_pos_masks": mask,
                "deepstack_visual_embeds": [torch.cat(f).to(embeds) for f in zip(*deepstack)],
            }
        captured: list[torch.Tensor] = []
        # the last layer's own output: transformers' last hidden state has the final norm applied
        handle = model.layers[-1].register_forward_hook(
            lambda module, args, output: captured.append(output[0] if isinstance(output, tuple) else output)
        )
        try:
            model(inputs_embeds=embeds, use_cache=False, **kwargs)
        finally:
            handle.remove()
        return captured[0].float(), None

    def row_tags(self, tokens: dict[str, TokenWeights], images: Sequence[torch.Tensor] = ()) -> torch.Tensor:
        """[rows] modality tag of each conditioning row (ComfyUI's minimax_token_tags): a vision block, from its
        start to its end token, is video (0), the rest text (1)."""
        ids = [int(t) for chunk in tokens[SUB] for t, _ in chunk]
        tags, shift = [TEXT_TAG] * len(ids), 0
        for at, image in zip(self._slots(ids, images), images):
            _, gh, gw = self._grid(image)
            size = (gh // qwen3vl_vision.MERGE) * (gw // qwen3vl_vision.MERGE)
            at += shift
            tags[at - 1 : at + 2] = [VIDEO_TAG] * (size + 2)
            shift += size - 1
        return torch.tensor(tags, dtype=torch.long)

    def _slots(self, ids: list[int], images: Sequence[torch.Tensor]) -> list[int]:
        slots = [i for i, t in enumerate(ids) if t == IMAGE_PAD][: len(images)]
        if len(slots) < len(images):
            raise ValueError(f"MiniMax H3: {len(images)} pictures for {len(slots)} vision blocks in the prompt")
        return slots

    def _pictures(self, images: Sequence[torch.Tensor]) -> list[qwen3vl_vision.VisionEmbeddings]:
        if images and VISION not in self.modules:
            raise ValueError(
                "clip: this MiniMax H3 text encoder file has no vision tower (model.visual.* tensors), so it "
                "cannot read the first/last frame; use a qwen3vl_32b_minimax_h3 file that has one"
            )
        return [qwen3vl_vision.encode_image(self.modules[VISION], image) for image in images]

    def _grid(self, image: torch.Tensor) -> tuple[int, int, int]:
        patch = self.modules[VISION].config.patch_size if VISION in self.modules else 16
        h, w = qwen3vl_vision.resized_size(image.shape[1], image.shape[2], patch * qwen3vl_vision.MERGE)
        return 1, h // patch, w // patch


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> MiniMaxH3TextEncoder:
    """MiniMax H3's CLIP object from CLIPLoader's Qwen3-VL file (its vision tower too, where the file has one)."""
    if isinstance(state_dicts, Mapping):
        state_dicts = [state_dicts]
    path = ref.sources[0] if ref.sources else None
    sd = next((s for s in state_dicts if find_prefix(s.keys(), LM_MARKER) is not None), None)
    if sd is None:
        raise ModelLoadError(path, "MiniMax H3 needs its Qwen3-VL text encoder (qwen3vl_32b_minimax_h3*); none found")
    modules = {SUB: build_language_model(sd, path)}
    if qwen3vl_vision.has_vision_model(sd):
        modules[VISION] = qwen3vl_vision.build_vision_model(sd, path)
    return MiniMaxH3TextEncoder(
        arch="minimax_h3", modules=modules, layer=None, tokenizer=qwen_tokenizer(tokenizer_dirs(), path)
    )
