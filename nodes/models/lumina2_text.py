"""Lumina 2's text encoder: Gemma 2 2B (nodes.models.gemma2_text) from an all-in-one checkpoint
(`text_encoders.gemma2_2b.`) or CLIPLoader's gemma_2_2b file (type lumina2), as ComfyUI's LuminaTokenizer /
LuminaModel: the `gemma2_2b` tokens of the whole text and the hidden state of the second-to-last layer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from cluster.refs import ModelRef
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.gemma2_text import LAYER, Gemma2Encoder, find_gemma2_prefix, load_gemma2
from nodes.models.lora import lora_modules
from nodes.models.safetensors_io import load_state_dict

SUB = "gemma2_2b"  # ComfyUI's name for the sub-encoder (its token dict key)


@dataclass
class Lumina2TextEncoder(TextEncoder):
    gemma: Gemma2Encoder | None = None

    def tokenize(self, text: str) -> dict[str, list[list[tuple[int, float]]]]:
        return {SUB: self.gemma.tokenize(text)}

    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, None]:
        layer = LAYER if self.layer is None else int(self.layer)  # CLIPSetLastLayer picks another
        return self.gemma.encode(tokens[SUB], layer), None


def _refuse_text_encoder_loras(ref: ModelRef) -> None:
    """LoraLoader hands the CLIP every LoRA: one with weights for the diffusion model only changes nothing here
    (as in ComfyUI), one with weights for the text encoder is refused by name (not merged into Gemma 2 yet)."""
    for patch in ref.patches:
        names = lora_modules(load_state_dict(patch.path, patch.digest), patch.path)
        other = [n for n in names if not n.startswith(("lora_unet_", "diffusion_model."))]
        if other:
            raise ModelLoadError(
                patch.path, f"LoRA weights for Lumina 2's Gemma 2 text encoder are not supported yet (e.g. {other[0]})"
            )


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> Lumina2TextEncoder:
    """Lumina 2's CLIP object from a checkpoint holding Gemma 2 or a bare Gemma 2 file."""
    if isinstance(state_dicts, Mapping):
        state_dicts = [state_dicts]
    i = next((i for i, s in enumerate(state_dicts) if find_gemma2_prefix(s.keys()) is not None), None)
    path = ref.sources[i if i is not None and i < len(ref.sources) else 0] if ref.sources else None
    if i is None:
        raise ModelLoadError(path, "Lumina 2 needs a Gemma 2 text encoder (gemma_2_2b.safetensors); none found")
    _refuse_text_encoder_loras(ref)
    gemma = load_gemma2(state_dicts[i], path)
    return Lumina2TextEncoder(arch="lumina2", modules={SUB: gemma.model}, layer=ref.option("layer"), gemma=gemma)
