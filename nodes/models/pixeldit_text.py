"""PixelDiT's text encoder: Gemma 2 2B-it (Comfy-Org's gemma_2_2b_it_elm file, CLIPLoader type pixeldit) as the
newest ComfyUI's PixelDiTGemma2TE computes it, read from its comfy/text_encoders/pixeldit.py:

- the prompt is prefixed with PixelDiT's fixed "Enhanced prompt" instruction (PIXELDIT_PREAMBLE below, the
  chi_prompt PixelDiT and Sana publish) unless it already starts with it; the whole text is tokenized at once
  (SentencePiece with <bos>, no weights parsed), right-padded with <pad> (0) to the preamble's token count + 298
  and cut there; an empty prompt is <bos> and 299 pads;
- the encoder's final (normed) hidden state, pads masked out as keys;
- of a sequence longer than 300, the first position (<bos>) and the last 299 are kept: the 300 positions the
  diffusion model's text position table has."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from cluster.refs import ModelRef
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.gemma2_text import BOS, PAD, Gemma2Encoder, find_gemma2_prefix, load_gemma2

SUB = "gemma2_2b"  # ComfyUI's name for the sub-encoder (its token dict key)
MAX_LENGTH = 300
PIXELDIT_PREAMBLE = (
    'Given a user prompt, generate an "Enhanced prompt" that provides detailed visual descriptions '
    "suitable for image generation. Evaluate the level of detail in the user prompt:\n"
    "- If the prompt is simple, focus on adding specifics about colors, shapes, sizes, textures, "
    "and spatial relationships to create vivid and concrete scenes.\n"
    "- If the prompt is already detailed, refine and enhance the existing details slightly without "
    "overcomplicating.\n"
    "Here are examples of how to transform or refine prompts:\n"
    "- User Prompt: A cat sleeping -> Enhanced: A small, fluffy white cat curled up in a round shape, "
    "sleeping peacefully on a warm sunny windowsill, surrounded by pots of blooming red flowers.\n"
    "- User Prompt: A busy city street -> Enhanced: A bustling city street scene at dusk, featuring "
    "glowing street lamps, a diverse crowd of people in colorful clothing, and a double-decker bus "
    "passing by towering glass skyscrapers.\n"
    "Please generate only the enhanced description for the prompt below and avoid including any "
    "additional commentary or evaluations:\n"
    "User Prompt: "
)
PREAMBLE_START = 'Given a user prompt, generate an "Enhanced prompt"'


@dataclass
class PixelDiTTextEncoder(TextEncoder):
    gemma: Gemma2Encoder | None = None

    def _ids(self, text: str) -> list[int]:
        import sentencepiece

        sp = sentencepiece.SentencePieceProcessor(model_proto=self.gemma.proto)
        # ComfyUI unescapes \( and \) even with weights disabled
        return [BOS, *sp.encode(text.replace("\\(", "(").replace("\\)", ")"))]

    def tokenize(self, text: str) -> dict[str, list[list[tuple[int, float]]]]:
        if "embedding:" in text:
            raise ValueError("textual-inversion embeddings (embedding:...) are not supported for PixelDiT's Gemma 2")
        if not text.strip():
            ids = [BOS] + [PAD] * (MAX_LENGTH - 1)
        else:
            length = len(self._ids(PIXELDIT_PREAMBLE)) + MAX_LENGTH - 2
            ids = self._ids(text if text.startswith(PREAMBLE_START) else PIXELDIT_PREAMBLE + text)[:length]
            ids += [PAD] * (length - len(ids))
        return {SUB: [[(t, 1.0) for t in ids]]}

    @torch.no_grad()
    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, None]:
        if self.layer is not None:
            raise ValueError("CLIPSetLastLayer does not apply to PixelDiT's text encoder (it takes the last layer)")
        ids = [t for chunk in tokens[SUB] for t, _ in chunk]
        # ComfyUI's attention mask: every token up to the first pad, that pad excluded and all after it
        first_pad = ids.index(PAD) if PAD in ids[1:] else len(ids)
        mask = torch.zeros(1, len(ids), dtype=torch.long)
        mask[0, :first_pad] = 1
        ids_t = torch.tensor([ids], dtype=torch.long)
        out = self.gemma.model(input_ids=ids_t, attention_mask=mask).last_hidden_state.float()
        if out.shape[1] > MAX_LENGTH:
            out = torch.cat([out[:, :1], out[:, -(MAX_LENGTH - 1) :]], dim=1)
        return out, None


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> PixelDiTTextEncoder:
    """PixelDiT's CLIP object from a Gemma 2 text encoder file."""
    if isinstance(state_dicts, Mapping):
        state_dicts = [state_dicts]
    i = next((i for i, s in enumerate(state_dicts) if find_gemma2_prefix(s.keys()) is not None), None)
    path = ref.sources[i if i is not None and i < len(ref.sources) else 0] if ref.sources else None
    if i is None:
        raise ModelLoadError(path, "PixelDiT needs a Gemma 2 text encoder (gemma_2_2b_it_elm_bf16.safetensors)")
    if ref.patches:
        raise ModelLoadError(path, "LoRAs on PixelDiT's Gemma 2 text encoder are not supported yet")
    gemma = load_gemma2(state_dicts[i], path)
    return PixelDiTTextEncoder(arch="pixeldit", modules={SUB: gemma.model}, layer=ref.option("layer"), gemma=gemma)
