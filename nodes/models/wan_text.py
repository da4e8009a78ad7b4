"""Wan's text encoder as ComfyUI runs it (CLIPLoader type "wan"): the encoder of umt5-xxl, in transformers'
key layout (`shared.weight`, `encoder.block.N.layer.0.SelfAttention.relative_attention_bias.weight` in every
block: what tells umT5 from T5), with its SentencePiece model stored in the same file as a byte tensor
`spiece_model` (ComfyUI's repackaged umt5_xxl files carry it; ComfyUI reads the tokenizer from there).

ComfyUI's rules: no start token, </s> (1) after the prompt, padded with 0 to at least 512 tokens; the padding
is masked out of attention and its states are zeroed (enable_attention_masks, zero_out_masked)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from transformers import UMT5Config, UMT5EncoderModel

from cluster.refs import ModelRef
from nodes.models.components import TextEncoder
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.flux_tokenize import (
    ChunkRules,
    encode_weighted,
    tokenize_weighted,
    with_tokenizer_options,
)
from nodes.models.safetensors_io import build_module
from nodes.models.text_encoder_dtype import text_encoder_compute_dtype

UMT5_MARKER = "encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight"
SPIECE_KEY = "spiece_model"
END, PAD = 1, 0
RULES = ChunkRules(start=None, end=END, pad=PAD, max_length=99_999_999, pad_to_max_length=False, min_length=512)


def umt5_config(sd: Mapping[str, torch.Tensor]) -> UMT5Config:
    """umT5 encoder config from an unprefixed transformers-layout state dict's shapes (gated GELU, as ComfyUI's
    umt5_config_xxl)."""
    emb = sd["shared.weight"] if "shared.weight" in sd else sd["encoder.embed_tokens.weight"]
    bias = sd["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"]
    inner = sd["encoder.block.0.layer.0.SelfAttention.q.weight"].shape[0]
    layers = len({int(m.group(1)) for k in sd if (m := re.match(r"encoder\.block\.(\d+)\.", k))})
    return UMT5Config(
        vocab_size=emb.shape[0],
        d_model=emb.shape[1],
        d_kv=inner // bias.shape[1],
        d_ff=sd["encoder.block.0.layer.1.DenseReluDense.wi_0.weight"].shape[0],
        num_layers=layers,
        num_heads=bias.shape[1],
        relative_attention_num_buckets=bias.shape[0],
        feed_forward_proj="gated-gelu",
        dense_act_fn="gelu_pytorch_tanh",
        dropout_rate=0.0,
        is_encoder_decoder=False,
        use_cache=False,
        tie_word_embeddings=False,
    )


def spiece_tokenizer(model_proto: bytes) -> Callable[[str], list[int]]:
    """ComfyUI's tokenization of one text segment: each space-separated word encoded alone, no </s>."""
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_proto=model_proto)

    def encode(text: str) -> list[int]:
        return [t for word in text.split(" ") if word for t in sp.encode(word)]

    return encode


@dataclass
class WanTextEncoder(TextEncoder):
    tokenizer: Callable[[str], list[int]] | None = None
    rules: ChunkRules = RULES
    tokenizer_options: dict[str, int] = field(default_factory=dict)

    def tokenize(self, text: str) -> dict[str, list[list[tuple[int, float]]]]:
        return {"umt5xxl": tokenize_weighted(text, self.tokenizer, self.rules)}

    @torch.no_grad()
    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, torch.Tensor | None]:
        model = self.modules["umt5xxl"]

        def run(ids: torch.Tensor) -> tuple[torch.Tensor, None]:
            # attended: up to and including the first </s> of each row (ComfyUI's mask)
            ended = (ids == END).long().cumsum(dim=1)
            mask = ((ended == 0) | ((ended == 1) & (ids == END))).long()
            states = model(input_ids=ids.to(model.device), attention_mask=mask.to(model.device)).last_hidden_state
            return states.float() * mask[..., None].to(states.device), None

        cond, _ = encode_weighted(tokens["umt5xxl"], self.rules, run)
        return cond, None


def load_text_encoder(
    ref: ModelRef, state_dicts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, torch.Tensor]
) -> WanTextEncoder:
    sd = state_dicts if isinstance(state_dicts, Mapping) else state_dicts[0]
    path = ref.sources[0] if ref.sources else None
    prefix = find_prefix(sd.keys(), UMT5_MARKER)
    if prefix is None:
        raise ModelLoadError(
            path,
            "Wan needs the umt5-xxl text encoder; no umT5 weights (a relative attention "
            "bias in every block) in the file",
        )
    sd = strip_prefix(sd, prefix)
    spiece = sd.pop(SPIECE_KEY, None)
    if spiece is None:
        raise ModelLoadError(
            path, "the umt5-xxl file holds no tokenizer (spiece_model), as ComfyUI's repackaged umt5_xxl files do"
        )
    emb = sd.get("shared.weight", sd.get("encoder.embed_tokens.weight"))
    sd["shared.weight"] = sd["encoder.embed_tokens.weight"] = emb
    try:
        config = umt5_config(sd)
    except KeyError as e:
        raise ModelLoadError(path, f"not a usable umt5 encoder: no {e}") from None
    module = build_module(
        lambda: UMT5EncoderModel(config), sd, path, "umt5 text encoder", dtype=text_encoder_compute_dtype()
    )
    rules = with_tokenizer_options(RULES, dict(ref.option("tokenizer_options", ())), "umt5xxl")
    return WanTextEncoder(
        arch="wan21",
        modules={"umt5xxl": module},
        layer=None,
        tokenizer=spiece_tokenizer(spiece.numpy().tobytes()),
        rules=rules,
    )
