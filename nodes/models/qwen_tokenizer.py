"""Qwen2's byte-level BPE tokenizer (Qwen2/2.5/3 text encoders: Z-Image, Flux2-Klein, Qwen-Image).

The 151,643 BPE ranks Qwen published ship with the project as a `tokenizers` tokenizer.json (gzip'd; origin
and licence in NOTICE; built by scripts/build_qwen_tokenizer.py), as ComfyUI carries its `qwen25_tokenizer`.
A user's copy in ComfyUI's layouts (`tokenizer.json`, or `vocab.json` + `merges.txt`) in a `qwen25_tokenizer`
or `qwen3_tokenizer` folder under models/text_encoders or models/configs is used first."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from .errors import ModelLoadError

QWEN_RANKS = 151643  # byte-level BPE tokens (256 bytes + 151,387 merges)
ENDOFTEXT_ID = 151643  # also the pad token of ComfyUI's Qwen text encoders
IM_START_ID, IM_END_ID = 151644, 151645
# Qwen's added tokens, ids from 151643 on, as Qwen2.5 and Qwen3 publish them (the first 14 are "special").
ADDED_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)
SPECIAL_COUNT = 14
# Qwen's pre-tokenizer split (the GPT-4-style pattern with single digits).
SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SHIPPED_FILE = Path(__file__).parent / "data" / "qwen2_tokenizer.json.gz"
VOCAB_ENV = "COMFY_CLUSTER_QWEN_VOCAB"
USER_DIR_NAMES = ("qwen25_tokenizer", "qwen3_tokenizer")


def build_tokenizer(
    vocab: dict[str, int], merges: list[tuple[str, str]], added: Iterable[tuple[int, str, bool]] | None = None
):
    """A `tokenizers.Tokenizer` with Qwen2's pipeline (NFC, the split pattern, byte-level) over a vocab and
    merges in GPT-2's byte-to-unicode spelling; `added` = (id, content, special), Qwen's list by default."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE

    tok = Tokenizer(BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    if added is None:
        added = [(QWEN_RANKS + i, t, i < SPECIAL_COUNT) for i, t in enumerate(ADDED_TOKENS)]
    for want, content, special in sorted(added):
        token = AddedToken(content, special=special, normalized=False)
        (tok.add_special_tokens if special else tok.add_tokens)([token])
        if tok.token_to_id(content) != want:
            raise ValueError(f"added token {content!r} got id {tok.token_to_id(content)}, expected {want}")
    return tok


class QwenTokenizer:
    """Text -> Qwen token ids, no start/end tokens added (Qwen has none); special tokens in the text
    (the chat template's <|im_start|> ...) are recognised as ComfyUI's Qwen2Tokenizer does."""

    def __init__(self, tok, source: str) -> None:
        self._tok = tok
        self.source = source
        if tok.token_to_id("<|endoftext|>") != ENDOFTEXT_ID or tok.token_to_id("<|im_start|>") != IM_START_ID:
            raise ModelLoadError(source, "not a Qwen2 vocabulary (<|endoftext|> is not 151643)")

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> QwenTokenizer:
        """A tokenizer.json (optionally .gz), or vocab.json with merges.txt beside it (and the added tokens
        from tokenizer_config.json beside it when there is one, else Qwen's)."""
        from tokenizers import Tokenizer

        path = os.fspath(path)
        try:
            if path.endswith(".gz"):
                return cls(Tokenizer.from_str(gzip.decompress(Path(path).read_bytes()).decode("utf-8")), path)
            if os.path.basename(path) != "vocab.json":
                return cls(Tokenizer.from_file(path), path)
            folder = Path(path).parent
            vocab = json.loads(Path(path).read_text(encoding="utf-8"))
            lines = (folder / "merges.txt").read_text(encoding="utf-8").split("\n")
            merges = [tuple(ln.split(" ")) for ln in lines if ln and not ln.startswith("#version")]
            return cls(build_tokenizer(vocab, merges, _config_added_tokens(folder / "tokenizer_config.json")), path)
        except ModelLoadError:
            raise
        except Exception as e:  # gzip, json and tokenizers each raise their own types
            raise ModelLoadError(path, f"not a usable Qwen tokenizer ({type(e).__name__}: {e})") from None

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def token_id(self, token: str) -> int | None:
        """The id of a token of the vocabulary or of the added tokens; None when there is no such token."""
        return self._tok.token_to_id(token)

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)


def _config_added_tokens(config: Path) -> list[tuple[int, str, bool]] | None:
    if not config.is_file():
        return None
    decoder = json.loads(config.read_text(encoding="utf-8")).get("added_tokens_decoder", {})
    return [(int(i), t["content"], bool(t.get("special", True))) for i, t in decoder.items()] or None


def tokenizer_candidates(search_dirs: Iterable[str | os.PathLike] = ()) -> list[Path]:
    """Where a Qwen tokenizer may be, in order: $COMFY_CLUSTER_QWEN_VOCAB (a file or a folder), a
    qwen25_tokenizer/ or qwen3_tokenizer/ folder in the given folders, then the copy shipped here."""
    folders: list[Path] = []
    env = os.environ.get(VOCAB_ENV)
    out: list[Path] = []
    if env:
        p = Path(env)
        folders.append(p) if p.is_dir() else out.append(p)
    folders += [Path(d) / name for d in search_dirs for name in USER_DIR_NAMES]
    for f in folders:
        out += [f / "tokenizer.json", f / "vocab.json"]
    out.append(SHIPPED_FILE)
    return out


@lru_cache(maxsize=4)
def _load(path: str) -> QwenTokenizer:
    return QwenTokenizer.from_file(path)


def qwen_tokenizer(search_dirs: Iterable[str | os.PathLike] = (), model_path: str | None = None) -> QwenTokenizer:
    """The Qwen2 tokenizer: the user's copy when there is one, else the shipped one."""
    for cand in tokenizer_candidates(search_dirs):
        if cand.is_file():
            return _load(str(cand))
    raise ModelLoadError(
        model_path,
        f"this text encoder needs Qwen's tokenizer, and the copy shipped with Comfy "
        f"Cluster ({SHIPPED_FILE}) is missing: reinstall, or put ComfyUI's "
        f"qwen25_tokenizer folder into models/text_encoders/ of the workspace",
    )
