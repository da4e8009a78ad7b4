"""ComfyUI's prompt tokenizers (comfy.sd1_clip.SDTokenizer / SD1Tokenizer, comfy.sdxl_clip.SDXLClipGTokenizer /
SDXLTokenizer, comfy.text_encoders.sd3_clip.T5XXLTokenizer / SD3Tokenizer) in this process: packs build them to
tokenize prompts themselves or check a CLIP's tokenizer against them. The vocabularies are the ones the project
ships (OpenAI's CLIP BPE, T5-XXL's SentencePiece unigram), as ComfyUI carries its own.

tokenize_with_weights gives ComfyUI's windows: "(word:1.2)" weights, "embedding:name" textual inversions when an
embedding directory is given (their vectors take the tokens' place), windows of max_length with start / end
tokens and padding, a long segment split across windows and a short one moved whole to the next; with
return_word_ids each token carries the 1-based index of its segment (0 for start, end and padding)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, ClassVar

from nodes.models.embeddings import load_embed
from nodes.models.tokenizer import escape_parens, parse_weights, unescape_parens

log = logging.getLogger(__name__)
EMBEDDING = "embedding:"
MAX_WORD_LENGTH = 8  # a segment this long may be split across windows


def _clip_vocab() -> Any:
    from nodes.models.tokenizer import OPENAI_VOCAB_SIZE, bpe_for_vocab_size

    return bpe_for_vocab_size(OPENAI_VOCAB_SIZE)


class SDTokenizer:
    """One text encoder's tokenizer (ComfyUI's constructor arguments). `tokenizer_path` with `tokenizer_class`
    (a transformers tokenizer class) loads that tokenizer as ComfyUI does; without a path it is the CLIP
    vocabulary shipped with the project."""

    def __init__(
        self,
        tokenizer_path: str | None = None,
        max_length: int = 77,
        pad_with_end: bool = True,
        embedding_directory: Any = None,
        embedding_size: int = 768,
        embedding_key: str = "clip_l",
        tokenizer_class: Any = None,
        has_start_token: bool = True,
        has_end_token: bool = True,
        pad_to_max_length: bool = True,
        min_length: int | None = None,
        pad_token: int | None = None,
        end_token: int | None = None,
        min_padding: int | None = None,
        tokenizer_data: dict | None = None,
        tokenizer_args: dict | None = None,
        encode: Callable[[str], list[int]] | None = None,
        special: tuple[int | None, int | None] | None = None,
    ) -> None:
        self.tokenizer: Any = None  # the transformers tokenizer underneath, where there is one (ComfyUI's attribute)
        if encode is None:
            encode, special = self._load(
                tokenizer_path, tokenizer_class, tokenizer_args or {}, has_start_token, has_end_token
            )
        self.encode_word = encode
        self.start_token, default_end = special
        self.end_token = end_token if end_token is not None else default_end if has_end_token else None
        self.pad_token = pad_token if pad_token is not None else (self.end_token if pad_with_end else 0)
        self.max_length, self.min_length, self.min_padding = max_length, min_length, min_padding
        self.pad_to_max_length, self.pad_with_end = pad_to_max_length, pad_with_end
        self.max_word_length = MAX_WORD_LENGTH
        self.embedding_directory, self.embedding_size = embedding_directory, embedding_size
        self.embedding_key, self.embedding_identifier = embedding_key, EMBEDDING

    def _load(
        self, path: str | None, cls: Any, args: dict, has_start: bool, has_end: bool
    ) -> tuple[Callable[[str], list[int]], tuple[int | None, int | None]]:
        if path is None:
            bpe = _clip_vocab()
            self.tokenizer = bpe._tok
            return bpe.encode, ((bpe.bos_id if has_start else None), bpe.eos_id)
        if cls is None:
            from transformers import CLIPTokenizer as cls
        tok = self.tokenizer = cls.from_pretrained(path, **args)
        empty = tok("")["input_ids"]  # the special tokens the tokenizer adds, as ComfyUI reads them
        start = empty[0] if has_start else None
        end = empty[1 if has_start else 0] if has_end and len(empty) > (1 if has_start else 0) else None
        return (lambda text: list(tok(text, add_special_tokens=False)["input_ids"])), (start, end)

    def _embedding(self, text: str) -> tuple[Any, str]:
        """The embedding named by the first word of `text` (tried again without trailing commas), and the text
        left after it (those commas, then the other words)."""
        name, *rest = text.split() or [""]
        leftover = " ".join(rest)
        embed = load_embed(name, self.embedding_directory, self.embedding_size, self.embedding_key)
        stripped = name.strip(",")
        if embed is None and len(stripped) < len(name):
            embed = load_embed(stripped, self.embedding_directory, self.embedding_size, self.embedding_key)
            return embed, f"{name[len(stripped) :]} {leftover}"
        return embed, leftover

    def _groups(self, text: str, disable_weights: bool) -> list[list[tuple[Any, float]]]:
        """The prompt's segments (and embeddings) as lists of (token or embedding vector, weight)."""
        text = escape_parens(text)
        groups = []
        for segment, weight in [(text, 1.0)] if disable_weights else parse_weights(text):
            parts = re.split(f" {EMBEDDING}|\n{EMBEDDING}", unescape_parens(segment))
            words = [parts[0]] + [EMBEDDING + p for p in parts[1:]]
            for word in (w for w in words if w):
                if word.startswith(EMBEDDING) and self.embedding_directory is not None:
                    name = word[len(EMBEDDING) :].strip("\n")
                    embed, word = self._embedding(name)
                    if embed is None:
                        log.warning("warning, embedding:%s does not exist, ignoring", name)
                    else:
                        groups.append([(row, weight) for row in (embed if embed.dim() > 1 else [embed])])
                    if not word:
                        continue
                groups.append([(t, weight) for t in self.encode_word(word)])
        return groups

    def tokenize_with_weights(
        self, text: str, return_word_ids: bool = False, tokenizer_options: dict | None = None, **kwargs: Any
    ) -> list[list[tuple]]:
        options = tokenizer_options or {}
        min_length = options.get(f"{self.embedding_key}_min_length", self.min_length)
        min_padding = options.get(f"{self.embedding_key}_min_padding", self.min_padding)
        head = [] if self.start_token is None else [(self.start_token, 1.0, 0)]
        has_end = self.end_token is not None
        windows = [list(head)]
        for index, group in enumerate(self._groups(text, kwargs.get("disable_weights", False)), start=1):
            tokens = [(t, w, index) for t, w in group]
            large = len(tokens) >= self.max_word_length
            while tokens:
                window = windows[-1]
                room = self.max_length - len(window) - has_end
                if len(tokens) <= room:
                    window.extend(tokens)
                    break
                if large:  # split a long segment at the window's end
                    window.extend(tokens[:room])
                    tokens = tokens[room:]
                if has_end:
                    window.append((self.end_token, 1.0, 0))
                if not large and self.pad_to_max_length:
                    window.extend([(self.pad_token, 1.0, 0)] * room)
                windows.append(list(head))
        last = windows[-1]
        if has_end:
            last.append((self.end_token, 1.0, 0))
        if min_padding is not None:
            last.extend([(self.pad_token, 1.0, 0)] * min_padding)
        if self.pad_to_max_length and len(last) < self.max_length:
            last.extend([(self.pad_token, 1.0, 0)] * (self.max_length - len(last)))
        if min_length is not None and len(last) < min_length:
            last.extend([(self.pad_token, 1.0, 0)] * (min_length - len(last)))
        if not return_word_ids:
            windows = [[(t, w) for t, w, _ in window] for window in windows]
        return windows

    def untokenize(self, token_weight_pair: list[tuple]) -> list[tuple[tuple, str]]:
        """Each (token, weight, ...) with its text (ComfyUI's form: ((token, weight), text))."""
        decode = getattr(_clip_vocab(), "decode", None)
        return [(pair, decode([pair[0]]) if decode and isinstance(pair[0], int) else "") for pair in token_weight_pair]

    def state_dict(self) -> dict:
        return {}


class _MultiTokenizer:
    """Several text encoders' tokenizers under ComfyUI's keys ("l", "g", "t5xxl")."""

    parts: ClassVar[Mapping[str, str]] = {}

    def tokenize_with_weights(self, text: str, return_word_ids: bool = False, **kwargs: Any) -> dict[str, list]:
        return {
            key: getattr(self, attr).tokenize_with_weights(text, return_word_ids, **kwargs)
            for key, attr in self.parts.items()
        }

    def untokenize(self, token_weight_pair: list[tuple]) -> list:
        return getattr(self, next(iter(self.parts.values()))).untokenize(token_weight_pair)

    def state_dict(self) -> dict:
        return {}


class SD1Tokenizer(_MultiTokenizer):
    """SD1's tokenizer: {clip_name: CLIP-L windows}."""

    def __init__(
        self,
        embedding_directory: Any = None,
        tokenizer_data: dict | None = None,
        clip_name: str = "l",
        tokenizer: type = SDTokenizer,
        name: str | None = None,
    ) -> None:
        self.clip_name = name if name is not None else clip_name
        self.clip = f"clip_{self.clip_name}"
        self.parts = {self.clip_name: self.clip}
        setattr(
            self, self.clip, tokenizer(embedding_directory=embedding_directory, tokenizer_data=tokenizer_data or {})
        )


class SDXLClipGTokenizer(SDTokenizer):
    """OpenCLIP-G's tokenizer: the CLIP vocabulary, padded with 0."""

    def __init__(
        self, tokenizer_path: str | None = None, embedding_directory: Any = None, tokenizer_data: dict | None = None
    ) -> None:
        super().__init__(
            tokenizer_path,
            pad_with_end=False,
            embedding_directory=embedding_directory,
            embedding_size=1280,
            embedding_key="clip_g",
            tokenizer_data=tokenizer_data,
        )


class SDXLTokenizer(_MultiTokenizer):
    """SDXL's tokenizer: {"g": CLIP-G windows, "l": CLIP-L windows}."""

    parts: ClassVar[Mapping[str, str]] = {"g": "clip_g", "l": "clip_l"}

    def __init__(self, embedding_directory: Any = None, tokenizer_data: dict | None = None) -> None:
        self.clip_l = SDTokenizer(embedding_directory=embedding_directory, tokenizer_data=tokenizer_data)
        self.clip_g = SDXLClipGTokenizer(embedding_directory=embedding_directory, tokenizer_data=tokenizer_data)


@lru_cache(maxsize=1)
def _t5_vocab() -> Callable[[str], list[int]]:
    from nodes.models.t5_tokenizer import SHIPPED_TOKENIZER, t5_tokenizer_from_json

    return t5_tokenizer_from_json(SHIPPED_TOKENIZER)


class T5XXLTokenizer(SDTokenizer):
    """T5-XXL's tokenizer as SD3 uses it: no start token, </s> (1) at the end, padded with 0 to 77 tokens,
    one window however long the prompt."""

    def __init__(
        self, embedding_directory: Any = None, tokenizer_data: dict | None = None, min_length: int = 77
    ) -> None:
        super().__init__(
            pad_with_end=False,
            embedding_directory=embedding_directory,
            embedding_size=4096,
            embedding_key="t5xxl",
            has_start_token=False,
            pad_to_max_length=False,
            max_length=99999999,
            min_length=min_length,
            tokenizer_data=tokenizer_data,
            encode=_t5_vocab(),
            special=(None, 1),
        )


class SD3Tokenizer(_MultiTokenizer):
    """SD3's tokenizer: {"g", "l", "t5xxl"} windows."""

    parts: ClassVar[Mapping[str, str]] = {"g": "clip_g", "l": "clip_l", "t5xxl": "t5xxl"}

    def __init__(self, embedding_directory: Any = None, tokenizer_data: dict | None = None) -> None:
        self.clip_l = SDTokenizer(embedding_directory=embedding_directory, tokenizer_data=tokenizer_data)
        self.clip_g = SDXLClipGTokenizer(embedding_directory=embedding_directory, tokenizer_data=tokenizer_data)
        self.t5xxl = T5XXLTokenizer(embedding_directory=embedding_directory, tokenizer_data=tokenizer_data)
