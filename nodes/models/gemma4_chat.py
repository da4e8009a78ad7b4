"""Gemma 4 as a CLIP that writes text: the LTX-2.5 templates' prompt enhancer
(text_encoders/gemma4_e2b_it_int8_convrot.safetensors, Comfy-Org/gemma-4) read by CLIPLoader and run by Generate
Text / Generate LTX2 Prompt. The language model is nodes/models/gemma4_text.py's (int8 ConvRot dequantized at
load); the file's vision and audio towers are not read, so images, video and audio are refused by name.

ComfyUI's rules (comfy/text_encoders/gemma4.py): the file's own `tokenizers` JSON (`tokenizer_json`; Gemma 4 ships
no SentencePiece model), the text tokenized without special tokens (its chat markers are special tokens, matched
whole) behind <bos> (2); the chat template `<|turn>user\\n{prompt}<turn|>\\n<|turn>model\\n`, with thinking a system
turn holding `<|think|>` before it, and a text that already begins with `<|turn>` (Generate LTX2 Prompt's) taken
as it is; one token at a time on the tied embeddings, the logits soft-capped at 30 (cap * tanh(logits / cap));
stopping at ids 1, 50 and 106; the decoded text keeps the special tokens but writes the thought channel's
markers as <think> ... </think> and drops <turn|> and <eos>. Sampling (greedy, or penalties, temperature and
the top-k / min-p / top-p filters with a seeded draw) is nodes/models/text_generate.py's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.models import gemma4_text
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError

KEY = "gemma4"
TOKENIZER_KEY = "tokenizer_json"
BOS = 2
STOP_IDS = (1, 50, 106)  # ComfyUI's Gemma4Config.stop_tokens: <eos>, 50, <turn|>
SOFTCAP = gemma4_text.SOFTCAP
TURN = "<|turn>"
CHAT = "<|turn>user\n{}<turn|>\n<|turn>model\n"
THINKING_SYSTEM = "<|turn>system\n<|think|><turn|>\n"


@dataclass
class Gemma4Chat(TextEncoder):
    tokenizer: Any = None  # tokenizers.Tokenizer

    def tokenize(self, text: str) -> dict[str, list[list[tuple[int, float]]]]:
        raise ValueError(
            "clip: this Gemma 4 file (without LTX-2.5's projection) is read here only to generate text (Generate "
            "Text, Generate LTX2 Prompt); encode prompts with LTX-2.5's text encoder file (gemma4-12b-with-proj-*)"
        )

    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.tokenize("")


def chat_text(prompt: str, use_template: bool = True, thinking: bool = False) -> str:
    """The text ComfyUI's Gemma 4 tokenizer builds for generation from a prompt."""
    if not use_template or prompt.startswith(TURN):
        return prompt
    return (THINKING_SYSTEM if thinking else "") + CHAT.format(prompt)


def prompt_ids(encoder: Gemma4Chat, text: str) -> list[int]:
    return [BOS] + encoder.tokenizer.encode(text, add_special_tokens=False).ids


def decode(encoder: Gemma4Chat, ids: list[int]) -> str:
    text = encoder.tokenizer.decode(list(ids), skip_special_tokens=False)
    text = text.replace("<|channel>thought\n", "<think>\n").replace("<channel|>", "</think>")
    return text.replace("<turn|>", "").replace("<eos>", "").strip()


def softcap(logits: torch.Tensor) -> torch.Tensor:
    return SOFTCAP * torch.tanh(logits / SOFTCAP)


def load_text_encoder(ref: ModelRef, sd: Mapping[str, torch.Tensor]) -> Gemma4Chat:
    """The prompt enhancer's CLIP from a Gemma 4 file with its tokenizer."""
    from tokenizers import Tokenizer

    path = ref.sources[0] if ref.sources else None
    raw = sd.get(TOKENIZER_KEY)
    if raw is None:
        raise ModelLoadError(path, f"the Gemma 4 file holds no tokenizer ({TOKENIZER_KEY}), as ComfyUI's do")
    tokenizer = Tokenizer.from_str(raw.numpy().tobytes().decode("utf-8"))
    lm = gemma4_text.load_language_model(sd, path)
    return Gemma4Chat(arch=KEY, modules={KEY: lm}, layer=None, tokenizer=tokenizer)
