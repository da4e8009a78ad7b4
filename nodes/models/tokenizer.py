"""CLIP tokenization with ComfyUI's semantics.

`ClipBPE` is byte-level CLIP BPE over any vocab: the file-free 514-token byte vocab of the demo models,
or OpenAI's 49,408-token vocab read from `bpe_simple_vocab_16e6.txt.gz` / a `tokenizer.json`.
`SDTokenizer` adds what ComfyUI's SDTokenizer does on top: "(word:1.2)" weights, 77-token chunks
with start/end tokens and padding (end token for CLIP-L, 0 for OpenCLIP)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from .errors import ModelLoadError

BOS, EOS = "<|startoftext|>", "<|endoftext|>"
BYTE_VOCAB_SIZE = 514
OPENAI_VOCAB_SIZE = 49408
VOCAB_ENV = "COMFY_CLUSTER_CLIP_VOCAB"
VOCAB_GZ = "bpe_simple_vocab_16e6.txt.gz"
# The CLIP vocabulary files a user may place, in the order they are looked for in a folder.
USER_VOCAB_FILES = (VOCAB_GZ, "tokenizer.json", "vocab.json")
# OpenAI's CLIP vocabulary ships with the project (origin and licence: NOTICE), as ComfyUI carries its own.
SHIPPED_VOCAB = Path(__file__).parent / "data" / VOCAB_GZ
NO_LIMIT = 1 << 30
TokenWeights = list[list[tuple[int, float]]]


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table that byte-level BPE vocabularies use."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {b: chr(b) for b in printable}, 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table  # insertion order (printable bytes first) is the vocab order


class ClipBPE:
    """Text -> CLIP token ids (without start/end), for any byte-level CLIP vocab."""

    def __init__(self, hf_tokenizer, source: str) -> None:
        hf_tokenizer.model_max_length = NO_LIMIT  # SDTokenizer chunks long prompts itself
        self._tok = hf_tokenizer
        self.source = source
        self.bos_id = hf_tokenizer.convert_tokens_to_ids(BOS)
        self.eos_id = hf_tokenizer.convert_tokens_to_ids(EOS)
        self.vocab_size = len(hf_tokenizer)

    @classmethod
    def from_merges(cls, merges: list[tuple[str, str]], source: str) -> ClipBPE:
        from transformers import CLIPTokenizer

        base = list(bytes_to_unicode().values())
        tokens = base + [b + "</w>" for b in base] + ["".join(m) for m in merges] + [BOS, EOS]
        tok = CLIPTokenizer(vocab={t: i for i, t in enumerate(tokens)}, merges=merges, model_max_length=NO_LIMIT)
        return cls(tok, source)

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> ClipBPE:
        """OpenAI's gzipped merges file, a tokenizers `tokenizer.json`, or a `vocab.json` with `merges.txt`
        beside it (the layout ComfyUI carries)."""
        path = os.fspath(path)
        try:
            if path.endswith(".gz"):
                lines = gzip.open(path).read().decode("utf-8").split("\n")
                # The file's first line is a version header; CLIP uses 48,894 merges (49,408 - 2*256 - 2).
                pairs = (tuple(line.split()) for line in lines[1 : OPENAI_VOCAB_SIZE - 2 * 256 - 2 + 1])
                merges = [p for p in pairs if len(p) == 2]
                return cls.from_merges(merges, path)
            from transformers import CLIPTokenizer

            if os.path.basename(path) == "vocab.json":  # ComfyUI's layout: vocab.json with merges.txt beside
                with open(path, encoding="utf-8") as f:
                    vocab = json.load(f)
                with open(os.path.join(os.path.dirname(path), "merges.txt"), encoding="utf-8") as f:
                    merges = [tuple(line.split()) for line in f if line.strip() and not line.startswith("#")]
                return cls(CLIPTokenizer(vocab=vocab, merges=merges, model_max_length=NO_LIMIT), path)
            return cls(CLIPTokenizer(tokenizer_file=path, model_max_length=NO_LIMIT), path)
        except Exception as e:  # gzip, json and tokenizers each raise their own types
            raise ModelLoadError(path, f"not a usable CLIP vocabulary ({type(e).__name__}: {e})") from None

    def encode(self, text: str) -> list[int]:
        return list(self._tok(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: Iterable[int]) -> str:
        return self._tok.decode(list(ids))


@lru_cache(maxsize=1)
def byte_level_bpe() -> ClipBPE:
    """The file-free byte-level vocab: every word splits into characters (514 tokens)."""
    return ClipBPE.from_merges([], "byte-level")


def vocab_candidates(search_dirs: Iterable[str | os.PathLike] = ()) -> list[Path]:
    """Where a real CLIP vocab may be, in order: $COMFY_CLUSTER_CLIP_VOCAB, the given folders (the
    workspace's models/text_encoders and models/configs), an installed open_clip's data file (located
    without importing open_clip, which cannot import here), then the copy shipped with the project."""
    out: list[Path] = []
    env = os.environ.get(VOCAB_ENV)
    if env:
        p = Path(env)
        out += [p / name for name in USER_VOCAB_FILES] if p.is_dir() else [p]
    for d in search_dirs:
        out += [Path(d) / name for name in USER_VOCAB_FILES]
    spec = importlib.util.find_spec("open_clip")
    if spec is not None and spec.origin:
        out.append(Path(spec.origin).parent / VOCAB_GZ)
    out.append(SHIPPED_VOCAB)
    return out


@lru_cache(maxsize=4)
def _openai_bpe(path: str) -> ClipBPE:
    return ClipBPE.from_file(path)


def build_shipped_tokenizers() -> None:
    """Build (and cache) the byte-level tokenizer and the shipped OpenAI vocabulary's, which every CLIP-L/G
    without a user vocabulary uses: 1.5 s of merges that an executor's warm-up pays instead of a prompt."""
    byte_level_bpe()
    if SHIPPED_VOCAB.is_file():
        _openai_bpe(str(SHIPPED_VOCAB))


def bpe_for_vocab_size(
    vocab_size: int, search_dirs: Iterable[str | os.PathLike] = (), model_path: str | None = None
) -> ClipBPE:
    """The tokenizer a text encoder with this embedding size needs."""
    if vocab_size == BYTE_VOCAB_SIZE:
        return byte_level_bpe()
    if vocab_size != OPENAI_VOCAB_SIZE:
        raise ModelLoadError(
            model_path,
            f"the text encoder has {vocab_size} token embeddings; only the "
            f"OpenAI CLIP vocab ({OPENAI_VOCAB_SIZE}) and the byte-level vocab "
            f"({BYTE_VOCAB_SIZE}) are known",
        )
    for cand in vocab_candidates(search_dirs):
        if cand.is_file():
            bpe = _openai_bpe(str(cand))
            if bpe.vocab_size == OPENAI_VOCAB_SIZE:
                return bpe
    raise ModelLoadError(
        model_path,
        "this text encoder needs the OpenAI CLIP vocabulary, and the copy "
        f"shipped with Comfy Cluster ({SHIPPED_VOCAB}) is missing: reinstall, or "
        f"put {VOCAB_GZ} or a CLIP tokenizer.json into models/text_encoders/ or "
        f"models/configs/ of the workspace, or set {VOCAB_ENV} to its path",
    )


# ---- ComfyUI's prompt weighting -------------------------------------------------------------------------

_ESCAPES = (("\\)", "\0\1"), ("\\(", "\0\2"))


def escape_parens(text: str) -> str:
    for src, dst in _ESCAPES:
        text = text.replace(src, dst)
    return text


def unescape_parens(text: str) -> str:
    for src, dst in _ESCAPES:
        text = text.replace(dst, src[1])
    return text


def _top_level_groups(text: str) -> list[str]:
    """Split into plain runs and top-level "(...)" groups (ComfyUI's parse: tolerant of bad nesting)."""
    parts, cur, depth = [], "", 0
    for ch in text:
        if ch == "(":
            if depth == 0:
                if cur:
                    parts.append(cur)
                cur = "("
            else:
                cur += ch
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                parts.append(cur + ")")
                cur = ""
            else:
                cur += ch
        else:
            cur += ch
    if cur:
        parts.append(cur)
    return parts


def parse_weights(text: str, weight: float = 1.0) -> list[tuple[str, float]]:
    """ "a (b:1.3) ((c))" -> [("a ", 1.0), ("b", 1.3), ("c", 1.21)]: each paren level multiplies by 1.1,
    an explicit ":w" sets the weight; "\\(" and "\\)" are literal parentheses."""
    out = []
    for part in _top_level_groups(text):
        if len(part) >= 2 and part[0] == "(" and part[-1] == ")":
            inner, w = part[1:-1], weight * 1.1
            colon = inner.rfind(":")
            if colon > 0:
                try:
                    w, inner = float(inner[colon + 1 :]), inner[:colon]
                except ValueError:
                    pass
            out += parse_weights(inner, w)
        else:
            out.append((part, weight))
    return out


class SDTokenizer:
    """ComfyUI's SDTokenizer: weighted segments -> 77-token chunks of (id, weight)."""

    MAX_WORD = 8  # segments at least this long may be split across chunks

    def __init__(self, bpe: ClipBPE, max_length: int = 77, pad_with_end: bool = True) -> None:
        self.bpe = bpe
        self.max_length = max_length
        self.start, self.end = bpe.bos_id, bpe.eos_id
        self.pad = self.end if pad_with_end else 0

    def tokenize_with_weights(self, text: str) -> TokenWeights:
        groups = [
            [(t, w) for t in self.bpe.encode(unescape_parens(seg))] for seg, w in parse_weights(escape_parens(text))
        ]
        chunks: TokenWeights = []
        chunk = [(self.start, 1.0)]
        room = self.max_length - 1  # the end token always fits
        for group in groups:
            large = len(group) >= self.MAX_WORD
            while group:
                if len(group) + len(chunk) <= room:
                    chunk += group
                    break
                free = room - len(chunk)
                if large:  # long segments are cut; short ones move whole to the next chunk
                    chunk += group[:free]
                    group = group[free:]
                    chunk.append((self.end, 1.0))
                else:
                    chunk += [(self.end, 1.0)] + [(self.pad, 1.0)] * free
                chunks.append(chunk)
                chunk = [(self.start, 1.0)]
        chunk.append((self.end, 1.0))
        chunk += [(self.pad, 1.0)] * (self.max_length - len(chunk))
        chunks.append(chunk)
        return chunks

    def empty_tokens(self, length: int) -> list[int]:
        """The token row ComfyUI encodes as the unweighted reference: start, end, then padding."""
        return ([self.start, self.end] + [self.pad] * length)[: max(length, 2)]
