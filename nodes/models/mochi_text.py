"""Mochi's text encoder: T5-XXL alone, as ComfyUI 0.3.64's CLIPLoader type mochi builds it
(comfy/text_encoders/genmo.py): LTX-Video's T5 rules (no start token, </s> after the prompt, the padding masked out
of the T5's attention and its mask beside the conditioning as "attention_mask") but padded to at least 256 tokens.
The Mochi DiT pools the caption with that mask and cuts its joint attention to the mask's count."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import torch

from cluster.refs import ModelRef
from nodes.models.flux_tokenize import with_tokenizer_options
from nodes.models.ltxv_text import RULES as LTXV_RULES
from nodes.models.ltxv_text import LTXVTextEncoder
from nodes.models.ltxv_text import load_text_encoder as load_ltxv

RULES = dataclasses.replace(LTXV_RULES, min_length=256)


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> LTXVTextEncoder:
    """Mochi's CLIP object from CLIPLoader's T5-XXL file (type mochi)."""
    encoder = load_ltxv(ref, state_dicts)
    encoder.arch = "mochi"
    encoder.rules = with_tokenizer_options(RULES, dict(ref.option("tokenizer_options", ())), "t5xxl")
    return encoder
