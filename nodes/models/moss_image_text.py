"""MOSS-Image's text encoder: Qwen3.5-9B (CLIPLoader type moss_image, the template's qwen3.5_9b_w4a8_gptq.safetensors,
read by nodes/models/qwen35_text.py); the same CLIP also drives the template's prompt enhancer (Generate Text).

As the official pipeline encodes a prompt (moss-image-mlx 0.2.0's text_encoder.py and kohakumoss 0.1.0's
encoders/text/tokens.py both call the tokenizer's chat template with thinking enabled; ComfyUI's moss_image
encoder was not readable here): the trimmed prompt as the user turn, the assistant turn opened with `<think>\\n`
(Qwen3.5's template, thinking on), at most 4096 tokens, no padding; the conditioning is the language model's last
hidden states after its final norm, [1, T, width]. Tokenizer: Qwen3.5's (nodes.models.qwen35_text)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nodes.models.qwen35_text import SUB, Qwen35TextEncoder, prompt_ids

TEMPLATE = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n<think>\n"
MAX_TOKENS = 4096
CLIP_TYPE = "moss_image"


@dataclass
class MossImageTextEncoder(Qwen35TextEncoder):
    def tokenize(self, text: str, **_: object) -> dict[str, list[list[tuple[int, float]]]]:
        ids = prompt_ids(TEMPLATE.format(text.strip()))[:MAX_TOKENS]
        return {SUB: [[(t, 1.0) for t in ids]]}

    @torch.no_grad()
    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, None]:
        model = self.modules[SUB]
        ids = torch.tensor([[t for chunk in tokens[SUB] for t, _ in chunk]], device=model.embed_tokens.weight.device)
        return model(input_ids=ids, use_cache=False).last_hidden_state.float(), None
