"""T5's tokenizer, found offline: a tokenizer.json beside the weights or in the models folder's configs/ (ComfyUI's
t5_tokenizer/ layout or t5xxl.tokenizer.json), else Google's T5 vocabulary shipped with the project. Light to
import (no transformers): prompt validation asks it whether a T5 file will find a tokenizer."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from nodes.models.errors import ModelLoadError

_TOKENIZER_FILES = ("t5_tokenizer/tokenizer.json", "t5xxl.tokenizer.json")
# Google's T5 SentencePiece vocabulary ships with the project (origin and licence: NOTICE), as ComfyUI carries
# its own. Its 32,100 pieces sit in embeddings Google's checkpoints pad to 32,128 rows.
SHIPPED_TOKENIZER = Path(__file__).parent / "data" / "t5xxl_tokenizer.json.gz"
T5_PIECES, T5_EMBEDDINGS = 32100, 32128


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
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.WhitespaceSplit(),
            pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True),
        ]
    )
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
        raise ModelLoadError(
            weights_path,
            f"no T5 tokenizer found: the copy shipped with Comfy Cluster "
            f"({SHIPPED_TOKENIZER}) is missing: reinstall, or put T5's "
            f"tokenizer.json at {tried}",
        )
    raise ModelLoadError(
        weights_path,
        f"no T5 tokenizer found: this T5 has {vocab_size} token embeddings, and the "
        f"T5 vocabulary shipped with Comfy Cluster fits only {T5_PIECES}-"
        f"{T5_EMBEDDINGS}; put this model's tokenizer.json at {tried}",
    )


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
