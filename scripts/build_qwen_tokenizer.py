"""Build nodes/models/data/qwen2_tokenizer.json.gz from Qwen's published BPE ranks.

Source: `dashscope/resources/qwen.tiktoken` in the dashscope wheel on PyPI (Apache-2.0, Alibaba), the 151,643
byte-level BPE ranks Qwen2/2.5/3 use. Usage (needs only the downloaded wheel, nothing installed):

    pip download --no-deps dashscope==2.0.2 -d /tmp/dl
    python scripts/build_qwen_tokenizer.py /tmp/dl/dashscope-2.0.2-py3-none-any.whl

Merges are derived from the ranks the standard way: each multi-byte token of rank r is the BPE of its bytes
under the ranks below r, which ends in exactly two parts; those two parts are its merge, ordered by r."""

from __future__ import annotations

import base64
import gzip
import hashlib
import sys
import zipfile
from pathlib import Path

from nodes.models.qwen_tokenizer import QWEN_RANKS, SHIPPED_FILE, build_tokenizer
from nodes.models.tokenizer import bytes_to_unicode

MEMBER = "dashscope/resources/qwen.tiktoken"


def read_ranks(wheel: str) -> dict[bytes, int]:
    with zipfile.ZipFile(wheel) as z:
        lines = z.read(MEMBER).splitlines()
    ranks = {base64.b64decode(tok): int(rank) for tok, rank in (ln.split() for ln in lines if ln)}
    assert len(ranks) == QWEN_RANKS and sorted(ranks.values()) == list(range(QWEN_RANKS))
    return ranks


def split_at_rank(ranks: dict[bytes, int], token: bytes, max_rank: int) -> list[bytes]:
    """BPE of `token` using only merges of rank below `max_rank`."""
    parts = [bytes([b]) for b in token]
    while True:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < max_rank and (best is None or r < best[1]):
                best = (i, r)
        if best is None:
            return parts
        i = best[0]
        parts[i : i + 2] = [parts[i] + parts[i + 1]]


def vocab_and_merges(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    table = bytes_to_unicode()
    spell = lambda b: "".join(table[x] for x in b)  # noqa: E731
    vocab = {spell(tok): rank for tok, rank in ranks.items()}
    merges = []
    for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(tok) == 1:
            continue
        parts = split_at_rank(ranks, tok, rank)
        assert len(parts) == 2, (tok, parts)
        merges.append((spell(parts[0]), spell(parts[1])))
    return vocab, merges


def main(wheel: str, out: Path = SHIPPED_FILE) -> None:
    vocab, merges = vocab_and_merges(read_ranks(wheel))
    text = build_tokenizer(vocab, merges).to_str()
    # mtime=0: the same input gives the same bytes (and sha256 in NOTICE)
    out.write_bytes(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))
    print(f"{out}: {len(vocab)} tokens, {len(merges)} merges, sha256 {hashlib.sha256(out.read_bytes()).hexdigest()}")


if __name__ == "__main__":
    main(sys.argv[1])
