"""T5 encoders (T5-XXL for Flux/SD3): config from tensor shapes, transformers' T5EncoderModel, and the
SentencePiece-unigram tokenizer found offline (a tokenizer.json beside the weights or in configs/, a demo
model's vocab list, or T5's vocabulary shipped with the project)."""
from __future__ import annotations

import base64
import gzip
import json
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path

import torch
from transformers import T5Config, T5EncoderModel, T5Tokenizer

from nodes.models.errors import ModelLoadError
from nodes.models.safetensors_io import build_module

T5_MARKER = "encoder.final_layer_norm.weight"
_TOKENIZER_FILES = ("t5_tokenizer/tokenizer.json", "t5xxl.tokenizer.json")
# Google's T5 SentencePiece vocabulary ships with the project (origin and licence: NOTICE), as ComfyUI carries
# its own. Its 32,100 pieces sit in embeddings Google's checkpoints pad to 32,128 rows.
SHIPPED_TOKENIZER = Path(__file__).parent / "data" / "t5xxl_tokenizer.json.gz"
T5_PIECES, T5_EMBEDDINGS = 32100, 32128


def t5_config(sd: Mapping[str, torch.Tensor]) -> T5Config:
    """T5 v1.1-style encoder config from an unprefixed HF-layout state dict."""
    emb = sd["shared.weight"] if "shared.weight" in sd else sd["encoder.embed_tokens.weight"]
    attn = "encoder.block.0.layer.0.SelfAttention."
    heads = sd[attn + "relative_attention_bias.weight"]
    inner = sd[attn + "q.weight"].shape[0]
    gated = "encoder.block.0.layer.1.DenseReluDense.wi_0.weight" in sd
    d_ff = sd["encoder.block.0.layer.1.DenseReluDense." + ("wi_0" if gated else "wi") + ".weight"].shape[0]
    n_layers = len({int(m.group(1)) for k in sd if (m := re.match(r"encoder\.block\.(\d+)\.", k))})
    cfg = T5Config(vocab_size=emb.shape[0], d_model=emb.shape[1], d_kv=inner // heads.shape[1], d_ff=d_ff,
                   num_layers=n_layers, num_heads=heads.shape[1], relative_attention_num_buckets=heads.shape[0],
                   feed_forward_proj="gated-gelu" if gated else "relu", dropout_rate=0.0,
                   is_encoder_decoder=False, use_cache=False, tie_word_embeddings=False)
    if gated:
        cfg.dense_act_fn = "gelu_pytorch_tanh"   # the activation ComfyUI's T5-XXL config names
    return cfg


def build_t5(sd: Mapping[str, torch.Tensor], path: str | None) -> T5EncoderModel:
    sd = dict(sd)
    emb = sd.get("shared.weight", sd.get("encoder.embed_tokens.weight"))
    if emb is None:
        raise ModelLoadError(path, "the T5 weights have no token embedding (shared.weight)")
    # T5EncoderModel's encoder.embed_tokens is `shared`; files hold either name.
    sd["shared.weight"] = sd["encoder.embed_tokens.weight"] = emb
    cfg = t5_config(sd)
    return build_module(lambda: T5EncoderModel(cfg), sd, path, "T5 text encoder", dtype=emb.dtype)


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


def t5_tokenizer_from_json(path: Path) -> Callable[[str], list[int]]:
    """T5's tokenizer from a tokenizers `tokenizer.json` (gzipped or not), run as transformers' T5Tokenizer runs
    it (the tokenizer ComfyUI uses): the file's unigram pieces and SentencePiece normalization map, then split
    on whitespace and mark word starts with "▁". The file's own pre-tokenizer is not used: releases of the same
    vocabulary differ there (trailing-space stripping, prefix scheme), and ComfyUI's ids do not follow them."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        spec = json.loads(raw)
        tok = Tokenizer.from_str(raw.decode("utf-8"))
    except Exception as e:  # gzip, json and tokenizers each raise their own types
        raise ModelLoadError(str(path), f"not a usable T5 tokenizer ({type(e).__name__}: {e})") from None
    if spec.get("model", {}).get("type") != "Unigram":
        raise ModelLoadError(str(path), "not a T5 tokenizer: its model is not a SentencePiece unigram")
    norm = spec.get("normalizer") or {}
    steps = norm.get("normalizers", [norm])
    charsmap = next((n["precompiled_charsmap"] for n in steps if n.get("type") == "Precompiled"), None)
    tok.normalizer = normalizers.Precompiled(base64.b64decode(charsmap)) if charsmap else None
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)])
    return lambda text: tok.encode(text, add_special_tokens=False).ids


def find_t5_tokenizer(weights_path: str | None, vocab_size: int | None = None) -> Callable[[str], list[int]]:
    """The real T5 tokenizer: t5_tokenizer/tokenizer.json or t5xxl.tokenizer.json beside the weights file or
    in the models folder's configs/, else (for a T5 with T5's vocabulary size) the copy shipped with the project.
    SentencePiece .model files are not read (no sentencepiece here)."""
    if weights_path is None:
        raise ModelLoadError(None, "no T5 tokenizer: the T5 weights come from no file")
    for candidate in t5_tokenizer_candidates(weights_path, vocab_size):
        if candidate.is_file():
            return _cached_t5_tokenizer(str(candidate))
    tried = " or ".join(str(c) for c in t5_tokenizer_candidates(weights_path, None))
    if vocab_size is not None and T5_PIECES <= vocab_size <= T5_EMBEDDINGS:
        raise ModelLoadError(weights_path, f"no T5 tokenizer found: the copy shipped with Comfy Cluster "
                                           f"({SHIPPED_TOKENIZER}) is missing: reinstall, or put T5's "
                                           f"tokenizer.json at {tried}")
    raise ModelLoadError(weights_path, f"no T5 tokenizer found: this T5 has {vocab_size} token embeddings, and the "
                                       f"T5 vocabulary shipped with Comfy Cluster fits only {T5_PIECES}-"
                                       f"{T5_EMBEDDINGS}; put this model's tokenizer.json at {tried}")


def t5_tokenizer_candidates(weights_path: str, vocab_size: int | None) -> list[Path]:
    """Where find_t5_tokenizer looks, in order; the shipped copy last, and only for T5's vocabulary size."""
    here = Path(weights_path).resolve().parent
    out = [d / name for d in (here, here.parent / "configs") for name in _TOKENIZER_FILES]
    if vocab_size is not None and T5_PIECES <= vocab_size <= T5_EMBEDDINGS:
        out.append(SHIPPED_TOKENIZER)
    return out


@lru_cache(maxsize=4)
def _cached_t5_tokenizer(path: str) -> Callable[[str], list[int]]:
    return t5_tokenizer_from_json(Path(path))
