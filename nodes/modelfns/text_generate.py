"""Text generation as a ModelFn (TextGenerate): a prompt in, the generated text out, on the text encoder's
language model. Tokenizing and decoding stay with the model (its tokenizer is the workspace's), so only the
result travels: the text's UTF-8 bytes and the generated token ids."""

from __future__ import annotations

from typing import Any

import torch

from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef
from nodes.models.components import TextEncoder


@register
class TextGenerateFn(ModelFn):
    """params: prompt, use_template, system_prompt, max_length, media (the names of the image/video/audio
    inputs given), and nodes.models.text_generate.Sampling's
    fields (do_sample, temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty, seed)."""

    name = "text_generate"

    def setup_io(self) -> None:
        self.add_output("text")  # uint8 [n]: the decoded text, special tokens left out
        self.add_output("ids")  # int64 [1, n]: the generated token ids, a final stop token included

    @classmethod
    def warm_up(cls) -> None:
        from nodes.models.loader import import_model_code

        import_model_code()

    def load_model(self, ref: ModelRef) -> TextEncoder:
        from nodes.models.loader import load_text_encoder
        from nodes.models.text_generate import attach_head, language_model

        encoder = load_text_encoder(ref)
        language_model(encoder)  # a CLIP that cannot generate is refused before any run
        attach_head(encoder, ref.sources[0])
        return encoder

    def execute(self, model: TextEncoder, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, torch.Tensor]:
        from nodes.models.text_generate import HEAD, Sampling, check_media, decode, generate, language_model, prompt_ids

        check_media(model.arch, params.get("media", ()))
        ids = prompt_ids(
            model,
            params["prompt"],
            params.get("use_template", True),
            params.get("system_prompt", ""),
            params.get("thinking", False),
        )
        new = generate(
            language_model(model),
            ids,
            int(params["max_length"]),
            Sampling.from_params(params),
            head=model.modules.get(HEAD),
        )
        text = decode(model, new)
        return {
            "text": torch.frombuffer(bytearray(text.encode("utf-8")), dtype=torch.uint8).clone(),
            "ids": torch.tensor([new], dtype=torch.long),
        }
