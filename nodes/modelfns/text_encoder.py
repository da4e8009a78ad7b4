"""Text encoding as a ModelFn: prompt text in, CONDITIONING tensors out."""

from __future__ import annotations

from typing import Any

import torch

from cluster.call import Params
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef
from nodes.models.components import TextEncoder


class TextEncodeParams(Params):
    text: str = ""
    texts: dict[str, str] | None = None  # a text per sub-encoder (CLIPTextEncodeSDXL's g and l)
    equal_chunks: bool | list[str] = False  # pad all sub-encoders (True), or those listed, to equal chunks
    drop_empty: bool = False  # an empty text gives its sub-encoder no tokens (CLIPTextEncodeSD3)
    images: int = 0  # Qwen-Image-Edit, MiniMax H3 fl2va: how many IMAGE inputs image0.. the prompt reads
    template: str | None = None  # and its chat template
    keep_vision: bool = True  # Qwen-Image 2.1: False leaves the images' tokens out and returns their slots
    drop_word: int = 0  # PhotoMakerEncode: the word id (1-based) whose tokens are left out of the prompt
    image_interleave: int = 0  # TextEncodeHunyuanVideo_ImageToVideo: every n-th state of the image's tokens kept


@register
class TextEncode(ModelFn):
    """params: text, or texts (a text per sub-encoder) and equal_chunks. Tokenises with the encoder's own
    tokenizer (ComfyUI's weighting syntax) and encodes. Qwen-Image-Edit's encoders add `images` (how many
    IMAGE inputs image0.. there are) and `template` (a chat template); MiniMax H3's first/last-frame prompt adds
    `images` and gives its rows' modality tags as `token_tags`. Anima's encoder adds `t5xxl_ids` and
    `t5xxl_weights`."""

    name = "text_encode"
    Params = TextEncodeParams

    def setup_io(self) -> None:
        self.add_output("cond")
        self.add_output("pooled")
        self.add_output("image_slots")

    @classmethod
    def warm_up(cls) -> None:
        from nodes.models.loader import import_model_code
        from nodes.models.tokenizer import build_shipped_tokenizers

        import_model_code()
        build_shipped_tokenizers()

    def load_model(self, ref: ModelRef) -> TextEncoder:
        from nodes.models.loader import load_text_encoder

        return load_text_encoder(ref)

    def execute(self, model: TextEncoder, inputs: dict[str, Any], params: TextEncodeParams) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        if params.images or params.template:  # Qwen-Image-Edit, MiniMax H3: images read inside the prompt
            images = [self.resolve(inputs, f"image{i}") for i in range(params.images)]
            interleave = {"image_interleave": params.image_interleave} if params.image_interleave else {}
            tokens = model.tokenize(params.text, images=len(images), template=params.template, **interleave)
            if not params.keep_vision:
                cond, slots = model.encode_with_slots(tokens, images, keep_vision=False)
                return {"cond": cond, "image_slots": torch.tensor(slots, dtype=torch.int64)}
            cond, pooled = model.encode(tokens, images)
            row_tags = getattr(model, "row_tags", None)
            if row_tags is not None:  # MiniMax H3: which conditioning rows are a picture's (ComfyUI's token tags)
                out["token_tags"] = row_tags(tokens, images)
        else:
            tokens = tokens_for(model, params)
            if params.drop_word:
                tokens = _without_word(model, tokens, params)
            cond, pooled = model.encode(tokens)
            extras = getattr(model, "extras", None)
            if extras is not None:  # Anima: the T5 ids and weights its diffusion model's LLM adapter reads
                out.update(extras(tokens))
        out["cond"] = cond
        if pooled is not None:
            out["pooled"] = pooled
        return out


def tokens_for(model: TextEncoder, params: TextEncodeParams) -> dict[str, list[list[tuple[int, float]]]]:
    """The tokens per sub-encoder: of `text`, or each sub-encoder's own text from `texts` (CLIPTextEncodeSDXL's
    text_g/text_l, CLIPTextEncodeFlux's clip_l/t5xxl). With `equal_chunks` the sub-encoders with fewer chunks
    (all, or those it lists) get the empty prompt's chunks appended until they have as many, as
    CLIPTextEncodeSDXL and CLIPTextEncodeSD3 do. With `drop_empty` an empty text gives its sub-encoder no
    tokens at all (CLIPTextEncodeSD3's empty_padding "none")."""
    texts = params.texts
    if not texts:
        return model.tokenize(params.text)
    drop = params.drop_empty
    tokens = {sub: [] if drop and text == "" else model.tokenize(text)[sub] for sub, text in texts.items()}
    equal = params.equal_chunks
    if equal:
        empty = model.tokenize("")
        subs = list(tokens) if equal is True else list(equal)
        most = max(len(tokens[sub]) for sub in subs)
        for sub in subs:
            while len(tokens[sub]) < most:
                tokens[sub] += empty[sub]
    return tokens


def _without_word(model: TextEncoder, tokens: dict, params: TextEncodeParams) -> dict:
    from nodes.models.photomaker import without_word

    sides = getattr(model, "sides", None)
    if not sides:
        raise ValueError(f"clip: PhotoMakerEncode needs a CLIP text encoder (SDXL's), not a {model.arch} one")
    return without_word(tokens, params.text, {name: side.tokenizer for name, side in sides.items()}, params.drop_word)
