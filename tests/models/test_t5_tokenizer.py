"""T5's vocabulary ships with the project: with no tokenizer file from the user, a T5-XXL text encoder
tokenizes as ComfyUI 0.3.64 does (tests/models/fixtures/comfyui_t5_tokenizer.json, recorded by
scripts/record_comfyui_t5_tokenizer.py with ComfyUI's own T5XXLTokenizer); user-placed files come first."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from nodes.models.errors import ModelLoadError
from nodes.models.flux_tokenize import tokenize_weighted
from nodes.models.sd3_text import T5_RULES
from nodes.models.t5_tokenizer import SHIPPED_TOKENIZER, T5_EMBEDDINGS, find_t5_tokenizer, t5_tokenizer_from_json

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_t5_tokenizer.json").read_text())
NOTICE = Path(__file__).resolve().parents[2] / "NOTICE"


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """The tokenizer a T5-XXL file finds in an otherwise empty models folder."""
    folder = tmp_path_factory.mktemp("text_encoders")
    return find_t5_tokenizer(str(folder / "t5xxl_fp16.safetensors"), T5_EMBEDDINGS)


def test_shipped_t5_vocab_gives_comfyuis_ids(shipped):
    cases = FIXTURE["cases"]
    assert len(cases) >= 300
    mismatched = []
    for case in cases:
        windows = tokenize_weighted(case["text"], shipped, T5_RULES)
        weights = [[w, i, j] for i, window in enumerate(windows) for j, (_, w) in enumerate(window) if w != 1.0]
        if [[t for t, _ in window] for window in windows] != case["ids"] or weights != case["weights"]:
            mismatched.append(case["text"])
    assert mismatched == []
    # The fixture is not trivial: long prompts, unknown pieces (<unk> = 2) and weights are in it.
    assert any(len(c["ids"][0]) > 150 for c in cases) and any(2 in c["ids"][0] for c in cases)
    assert sum(bool(c["weights"]) for c in cases) > 20


def test_shipped_t5_vocab_is_recorded_in_notice():
    digest = hashlib.sha256(SHIPPED_TOKENIZER.read_bytes()).hexdigest()
    notice = NOTICE.read_text()
    assert f"nodes/models/data/{SHIPPED_TOKENIZER.name}" in notice and digest in notice


def test_user_tokenizer_beside_the_weights_comes_first(tmp_path, shipped):
    """ComfyUI's layout (t5_tokenizer/tokenizer.json beside the file) is used before the shipped copy; here a
    user file whose every piece is shifted by one id shows which was read."""
    spec = json.loads(gzip.decompress(SHIPPED_TOKENIZER.read_bytes()))
    vocab = spec["model"]["vocab"]
    spec["model"]["vocab"] = vocab[:3] + [["<user>", 0.0]] + vocab[3:-1]
    (tmp_path / "t5_tokenizer").mkdir()
    (tmp_path / "t5_tokenizer" / "tokenizer.json").write_text(json.dumps(spec))
    user = find_t5_tokenizer(str(tmp_path / "t5xxl.safetensors"), T5_EMBEDDINGS)
    ids = shipped("a photo of a cat")
    assert user("a photo of a cat") == [i + 1 for i in ids]


def test_t5_of_another_vocabulary_without_tokenizer_is_a_clear_error(tmp_path):
    with pytest.raises(ModelLoadError, match="this T5 has 250112 token embeddings"):
        find_t5_tokenizer(str(tmp_path / "umt5.safetensors"), 250112)


def test_a_broken_tokenizer_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(ModelLoadError, match="not a usable T5 tokenizer"):
        t5_tokenizer_from_json(bad)
