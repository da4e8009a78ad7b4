"""ComfyUI's prompt syntax and chunking on the byte-level CLIP BPE."""

from __future__ import annotations

import gzip
import json

import pytest

from nodes.models.errors import ModelLoadError
from nodes.models.tokenizer import (
    SHIPPED_VOCAB,
    ClipBPE,
    SDTokenizer,
    bpe_for_vocab_size,
    byte_level_bpe,
    parse_weights,
)


def test_weight_syntax():
    assert parse_weights("a (b:1.3) c") == [("a ", 1.0), ("b", 1.3), (" c", 1.0)]
    assert parse_weights("(b)") == [("b", pytest.approx(1.1))]
    assert parse_weights("((b))") == [("b", pytest.approx(1.21))]
    assert parse_weights("(x (y:0.5) z:2)") == [("x ", 2.0), ("y", 0.5), (" z", 2.0)]
    assert parse_weights("[word]") == [("[word]", 1.0)]
    assert parse_weights("(a:b)") == [("a:b", pytest.approx(1.1))]  # not a number: kept as text


def test_escaped_parentheses_are_text():
    tok = SDTokenizer(byte_level_bpe())
    chunk = tok.tokenize_with_weights(r"\(cat\)")[0]
    assert all(w == 1.0 for _, w in chunk)
    assert [t for t, _ in chunk[1 : chunk.index((tok.end, 1.0))]] == byte_level_bpe().encode("(cat)")


def test_byte_level_ids_are_openai_clip_ids_for_bytes():
    bpe = byte_level_bpe()
    assert bpe.vocab_size == 514 and (bpe.bos_id, bpe.eos_id) == (512, 513)
    assert bpe.encode("a") == [320]  # OpenAI CLIP's id for "a</w>"
    # Printable bytes come first in OpenAI's byte order ("!" = 0); "</w>" forms follow at +256.
    assert bpe.encode("A cat!") == [320, ord("c") - 33, ord("a") - 33, 256 + ord("t") - 33, 256]


def test_chunks_padding_and_weights():
    sd1 = SDTokenizer(byte_level_bpe())
    xl_g = SDTokenizer(byte_level_bpe(), pad_with_end=False)
    one = sd1.tokenize_with_weights("hi (there:1.5)")[0]
    assert len(one) == 77 and one[0] == (512, 1.0)
    ids = [t for t, _ in one]
    assert ids[1:3] == [ord("h") - 33, 256 + ord("i") - 33] and set(ids[8:]) == {513}  # end, then end-padding
    assert [w for _, w in one[3:8]] == [1.5] * 5 and {w for _, w in one[8:]} == {1.0}
    g = [t for t, _ in xl_g.tokenize_with_weights("hi")[0]]
    assert g[3] == 513 and set(g[4:]) == {0}
    long = sd1.tokenize_with_weights("x" * 100)  # one segment of 100 tokens is split across chunks
    assert [len(c) for c in long] == [77, 77]
    assert long[0][-1] == (513, 1.0) and long[1][0] == (512, 1.0)
    assert sum(1 for c in long for t, _ in c if t not in (512, 513)) == 100


def test_openai_vocab_ships_with_the_project(tmp_path, monkeypatch):
    """No tokenizer file anywhere in the workspace, no open_clip: the shipped vocabulary (NOTICE) gives
    OpenAI's ids ("a photo of a cat" -> 320 1125 539 320 2368, between 49406 and 49407)."""
    monkeypatch.delenv("COMFY_CLUSTER_CLIP_VOCAB", raising=False)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    bpe = bpe_for_vocab_size(49408, [tmp_path])
    assert bpe.vocab_size == 49408 and (bpe.bos_id, bpe.eos_id) == (49406, 49407)
    assert bpe.encode("a photo of a cat") == [320, 1125, 539, 320, 2368]


def test_comfyuis_vocab_json_and_merges_layout_is_accepted(tmp_path, monkeypatch):
    """vocab.json + merges.txt in models/configs (the layout ComfyUI carries its CLIP tokenizer in) is found
    before the shipped copy and tokenizes the same."""
    monkeypatch.delenv("COMFY_CLUSTER_CLIP_VOCAB", raising=False)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    shipped = bpe_for_vocab_size(49408, [])
    (tmp_path / "vocab.json").write_text(json.dumps(shipped._tok.get_vocab()))
    merges = gzip.decompress(SHIPPED_VOCAB.read_bytes()).decode().split("\n")[1 : 49408 - 2 * 256 - 2 + 1]
    (tmp_path / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    bpe = bpe_for_vocab_size(49408, [tmp_path])
    assert bpe.source == str(tmp_path / "vocab.json")
    text = "a (photo:1.2) of an astronaut riding a horse, 8k"
    assert bpe.encode(text) == shipped.encode(text)


def test_real_vocab_from_gz_and_clear_error_without_it(tmp_path, monkeypatch):
    monkeypatch.delenv("COMFY_CLUSTER_CLIP_VOCAB", raising=False)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    monkeypatch.setattr("nodes.models.tokenizer.SHIPPED_VOCAB", tmp_path / "missing" / "vocab.txt.gz")
    with pytest.raises(ModelLoadError, match="COMFY_CLUSTER_CLIP_VOCAB"):
        bpe_for_vocab_size(49408, [tmp_path])
    # A vocab file in OpenAI's format (header line + merges); a small one still exercises the reader.
    gz = tmp_path / "bpe_simple_vocab_16e6.txt.gz"
    gz.write_bytes(gzip.compress(b"version\nc a\nca t</w>\n"))
    bpe = ClipBPE.from_file(gz)
    assert bpe.encode("cat") == [513] and bpe.encode("ca") == [ord("c") - 33, 256 + ord("a") - 33]  # merge 2: "cat</w>"
    assert bpe.eos_id == 515
