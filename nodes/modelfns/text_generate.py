"""Text generation as a ModelFn (TextGenerate): a prompt in, the generated text out, on the text encoder's
language model. Tokenizing and decoding stay with the model (its tokenizer is the workspace's), so only the
result travels: the text's UTF-8 bytes and the generated token ids. An IMAGE input travels to models that read
images (Qwen3.5)."""

from __future__ import annotations

from typing import Any

import torch

from cluster.call import Params
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef
from nodes.models.components import TextEncoder


class TextGenerateParams(Params):
    prompt: str
    max_length: int
    use_template: bool = True
    system_prompt: str = ""
    thinking: bool = False
    media: list[str] = []  # the names of the image/video/audio inputs given
    # nodes.models.text_generate.Sampling's fields
    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 50
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    seed: int = 0


@register
class TextGenerateFn(ModelFn):
    """params: a TextGenerateParams."""

    name = "text_generate"
    Params = TextGenerateParams

    def setup_io(self) -> None:
        self.add_input("image")  # IMAGE [B,H,W,C], given only when the node's image input is connected
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

    def execute(
        self, model: TextEncoder, inputs: dict[str, Any], params: TextGenerateParams
    ) -> dict[str, torch.Tensor]:
        from nodes.models.text_generate import (
            HEAD,
            Sampling,
            check_media,
            decode,
            generate,
            language_model,
            logit_cap,
            prompt_ids,
            stop_tokens,
        )

        check_media(model.arch, params.media)
        if model.arch == "qwen35":
            new = _generate_qwen35(model, inputs.get("image"), params, Sampling.from_params(params))
            return _outputs(decode(model, new), new)
        ids = prompt_ids(model, params.prompt, params.use_template, params.system_prompt, params.thinking)
        new = generate(
            language_model(model),
            ids,
            params.max_length,
            Sampling.from_params(params),
            stop_tokens=stop_tokens(model.arch),
            head=model.modules.get(HEAD),
            cap=logit_cap(model.arch),
        )
        return _outputs(decode(model, new), new)


def _outputs(text: str, ids: list[int]) -> dict[str, torch.Tensor]:
    return {
        "text": torch.frombuffer(bytearray(text.encode("utf-8")), dtype=torch.uint8).clone(),
        "ids": torch.tensor([ids], dtype=torch.long),
    }


def _generate_qwen35(model: TextEncoder, image: torch.Tensor | None, params: TextGenerateParams, sampling) -> list[int]:
    from nodes.models import qwen35_text

    images = qwen35_text.pictures(image)
    text = qwen35_text.chat_text(params.prompt, len(images), params.system_prompt, params.thinking, params.use_template)
    return qwen35_text.generate(model, qwen35_text.prompt_ids(text), images, params.max_length, sampling)
