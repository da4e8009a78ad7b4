"""ComfyUI's prompt tokenization rules, independent of the tokenizer: `(word:1.2)` / `(word)` weights,
`\\(` escapes, per-segment tokenization, chunking into windows with start/end tokens and padding, and the
weight interpolation against an empty prompt that the encoders apply afterwards."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from nodes.models.tokenizer import SDTokenizer, escape_parens, parse_weights, unescape_parens

Chunk = list[tuple[int, float]]


@dataclass(frozen=True)
class ChunkRules:
    """How one sub-encoder's windows are built (ComfyUI's SDTokenizer settings)."""

    start: int | None
    end: int | None
    pad: int
    max_length: int  # window length including start/end
    pad_to_max_length: bool
    min_length: int | None = None
    min_padding: int | None = None  # pad tokens always added after the last window's end (T5TokenizerOptions)


def with_tokenizer_options(rules: ChunkRules, options: dict[str, int], key: str) -> ChunkRules:
    """The rules with ComfyUI's tokenizer options for the sub-encoder `key` ("<key>_min_length",
    "<key>_min_padding") in place of its own settings."""
    return replace(
        rules,
        min_length=options.get(f"{key}_min_length", rules.min_length),
        min_padding=options.get(f"{key}_min_padding", rules.min_padding),
    )


def tokenize_weighted(text: str, encode: Callable[[str], list[int]], rules: ChunkRules) -> list[Chunk]:
    """Windows of (token id, weight). `encode` maps a text segment to ids without special tokens."""
    groups = []
    for segment, weight in parse_weights(escape_parens(text)):
        segment = unescape_parens(segment)
        if segment:
            groups.append([(t, weight) for t in encode(segment)])

    has_end = 1 if rules.end is not None else 0
    head: Chunk = [] if rules.start is None else [(rules.start, 1.0)]
    windows: list[Chunk] = [list(head)]
    for group in groups:
        large = len(group) >= SDTokenizer.MAX_WORD
        while group:
            window = windows[-1]
            room = rules.max_length - len(window) - has_end
            if len(group) <= room:
                window.extend(group)
                break
            # Too long for this window: split a long segment, or move a short one whole to the next window.
            if large:
                window.extend(group[:room])
                group = group[room:]
            if rules.end is not None:
                window.append((rules.end, 1.0))
            if not large and rules.pad_to_max_length:
                window.extend([(rules.pad, 1.0)] * room)
            windows.append(list(head))
    last = windows[-1]
    if rules.end is not None:
        last.append((rules.end, 1.0))
    if rules.min_padding is not None:
        last.extend([(rules.pad, 1.0)] * rules.min_padding)
    if rules.pad_to_max_length and len(last) < rules.max_length:
        last.extend([(rules.pad, 1.0)] * (rules.max_length - len(last)))
    if rules.min_length is not None and len(last) < rules.min_length:
        last.extend([(rules.pad, 1.0)] * (rules.min_length - len(last)))
    return windows


def empty_tokens(rules: ChunkRules, length: int) -> list[int]:
    ids = [t for t in (rules.start, rules.end) if t is not None]
    return ids + [rules.pad] * (length - len(ids))


def encode_weighted(
    windows: list[Chunk], rules: ChunkRules, run: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor | None]]
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """ComfyUI's ClipTokenWeightEncoder: encode all windows in one batch (plus an empty prompt when any
    weight is not 1), move weighted tokens away from the empty prompt's states, concatenate the windows.
    `run(ids [N,T])` returns (hidden states [N,T,D], pooled [N,P] or None). Pooled is the first window's."""
    weighted = any(w != 1.0 for window in windows for _, w in window)
    length = max(len(w) for w in windows)
    ids = [[t for t, _ in window] for window in windows]
    if weighted:
        ids.append(empty_tokens(rules, length))
    states, pooled = run(torch.tensor(ids, dtype=torch.long))
    out = []
    for k, window in enumerate(windows):
        z = states[k : k + 1].clone()
        if weighted:
            empty = states[-1]
            for j, (_, w) in enumerate(window):
                if w != 1.0:
                    z[0, j] = (z[0, j] - empty[j]) * w + empty[j]
        out.append(z)
    return torch.cat(out, dim=1), (None if pooled is None else pooled[0:1])
