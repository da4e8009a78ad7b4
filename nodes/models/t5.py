"""T5 encoders (T5-XXL for Flux/SD3): config from tensor shapes, transformers' T5EncoderModel, and the demo
models' unigram tokenizer from a vocab list (real T5 tokenizers: nodes.models.t5_tokenizer)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path

import torch
from transformers import T5Config, T5EncoderModel, T5Tokenizer

from nodes.models.errors import ModelLoadError
from nodes.models.safetensors_io import build_module
from nodes.models.text_encoder_dtype import text_encoder_compute_dtype

T5_MARKER = "encoder.final_layer_norm.weight"


def t5_config(sd: Mapping[str, torch.Tensor]) -> T5Config:
    """T5 v1.1-style encoder config from an unprefixed HF-layout state dict."""
    emb = sd["shared.weight"] if "shared.weight" in sd else sd["encoder.embed_tokens.weight"]
    attn = "encoder.block.0.layer.0.SelfAttention."
    heads = sd[attn + "relative_attention_bias.weight"]
    inner = sd[attn + "q.weight"].shape[0]
    gated = "encoder.block.0.layer.1.DenseReluDense.wi_0.weight" in sd
    d_ff = sd["encoder.block.0.layer.1.DenseReluDense." + ("wi_0" if gated else "wi") + ".weight"].shape[0]
    n_layers = len({int(m.group(1)) for k in sd if (m := re.match(r"encoder\.block\.(\d+)\.", k))})
    cfg = T5Config(
        vocab_size=emb.shape[0],
        d_model=emb.shape[1],
        d_kv=inner // heads.shape[1],
        d_ff=d_ff,
        num_layers=n_layers,
        num_heads=heads.shape[1],
        relative_attention_num_buckets=heads.shape[0],
        feed_forward_proj="gated-gelu" if gated else "relu",
        dropout_rate=0.0,
        is_encoder_decoder=False,
        use_cache=False,
        tie_word_embeddings=False,
    )
    if gated:
        cfg.dense_act_fn = "gelu_pytorch_tanh"  # the activation ComfyUI's T5-XXL config names
    return cfg


def build_t5(sd: Mapping[str, torch.Tensor], path: str | None) -> T5EncoderModel:
    sd = dict(sd)
    emb = sd.get("shared.weight", sd.get("encoder.embed_tokens.weight"))
    if emb is None:
        raise ModelLoadError(path, "the T5 weights have no token embedding (shared.weight)")
    # T5EncoderModel's encoder.embed_tokens is `shared`; files hold either name.
    sd["shared.weight"] = sd["encoder.embed_tokens.weight"] = emb
    cfg = t5_config(sd)
    return build_module(
        lambda: T5EncoderModel(cfg), sd, path, "T5 text encoder", dtype=text_encoder_compute_dtype(emb.dtype)
    )


def t5_hidden_states(model: T5EncoderModel, ids: torch.Tensor, layer: int = -1) -> torch.Tensor:
    """The states ComfyUI's T5 returns: the last layer's, or with layer < -1 (CLIPSetLastLayer) that
    block's output passed through the final layer norm. No attention mask: Flux attends to the padding."""
    if layer == -1:
        return model(input_ids=ids).last_hidden_state
    hs = model(input_ids=ids, output_hidden_states=True).hidden_states
    return model.encoder.final_layer_norm(hs[layer])


def tokenizer_from_vocab(path: Path) -> Callable[[str], list[int]]:
    """A unigram tokenizer from a JSON list of [piece, score] ([<pad>, </s>, <unk>, ...]); no files needed."""
    pieces = [(str(p), float(s)) for p, s in json.loads(path.read_text())]
    tok = T5Tokenizer(vocab=pieces, extra_ids=0)
    return lambda text: tok(text, add_special_tokens=False)["input_ids"]


def tokenizer_from_json(path: Path) -> Callable[[str], list[int]]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    return lambda text: tok.encode(text, add_special_tokens=False).ids
