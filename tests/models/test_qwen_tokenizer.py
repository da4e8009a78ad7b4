"""The shipped Qwen2 tokenizer gives ComfyUI's ids; ComfyUI's own layouts placed by a user are used first."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from nodes.models.errors import ModelLoadError
from nodes.models.qwen_tokenizer import SHIPPED_FILE, QwenTokenizer, qwen_tokenizer, tokenizer_candidates

FIXTURE = Path(__file__).parent / "fixtures" / "comfyui_qwen_tokenizer_ids.json"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv("COMFY_CLUSTER_QWEN_VOCAB", raising=False)


def test_shipped_tokenizer_gives_comfyuis_ids_on_360_prompts():
    """Unicode, digits, whitespace, the chat template's special tokens: ids recorded from ComfyUI 0.3.64's
    qwen25_tokenizer (scripts/record_comfyui_qwen_tokenizer.py)."""
    cases = json.loads(FIXTURE.read_text(encoding="utf-8"))["cases"]
    assert len(cases) >= 300
    tok = qwen_tokenizer([])
    assert tok.source == str(SHIPPED_FILE)
    wrong = [c["text"] for c in cases if tok.encode(c["text"]) != c["ids"]]
    assert wrong == []


def test_chat_template_specials_and_vocab_size():
    tok = qwen_tokenizer([])
    ids = tok.encode("<|im_start|>user\nA red fox<|im_end|>\n<|im_start|>assistant\n")
    assert ids[0] == 151644 and ids.count(151644) == 2 and ids.count(151645) == 1
    assert tok.vocab_size == 151643 + 22
    assert tok.decode(tok.encode("猫 🐈 café")) == "猫 🐈 café"


def test_shipped_file_is_the_one_notice_records():
    digest = hashlib.sha256(SHIPPED_FILE.read_bytes()).hexdigest()
    assert digest in (ROOT / "NOTICE").read_text()
    assert "data/*.json.gz" in (ROOT / "pyproject.toml").read_text()


def _write_comfyui_layout(folder: Path) -> None:
    """vocab.json + merges.txt + tokenizer_config.json, the files of ComfyUI's qwen25_tokenizer folder."""
    model = json.loads(gzip.decompress(SHIPPED_FILE.read_bytes()))["model"]
    folder.mkdir(parents=True)
    (folder / "vocab.json").write_text(json.dumps(model["vocab"], ensure_ascii=False), encoding="utf-8")
    merges = [" ".join(m) if isinstance(m, list) else m for m in model["merges"]]
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    added = {
        "151643": {"content": "<|endoftext|>", "special": True},
        "151644": {"content": "<|im_start|>", "special": True},
        "151645": {"content": "<|im_end|>", "special": True},
        "151646": {"content": "<|extra_user_token|>", "special": True},
    }
    (folder / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": added}))


def test_comfyuis_vocab_json_and_merges_folder_is_used_first(tmp_path):
    _write_comfyui_layout(tmp_path / "text_encoders" / "qwen25_tokenizer")
    tok = qwen_tokenizer([tmp_path / "configs", tmp_path / "text_encoders"])
    assert tok.source == str(tmp_path / "text_encoders" / "qwen25_tokenizer" / "vocab.json")
    shipped = qwen_tokenizer([])
    text = "<|im_start|>user\n一只猫, 8k photo  of a café<|im_end|>\n"
    assert tok.encode(text) == shipped.encode(text)
    assert tok.encode("<|extra_user_token|>") == [151646]  # the user's added tokens, not ours


def test_a_tokenizer_json_is_accepted_and_env_var_wins(tmp_path, monkeypatch):
    user = tmp_path / "mine.json"
    user.write_bytes(gzip.decompress(SHIPPED_FILE.read_bytes()))
    monkeypatch.setenv("COMFY_CLUSTER_QWEN_VOCAB", str(user))
    assert tokenizer_candidates([])[0] == user
    tok = qwen_tokenizer([])
    assert tok.source == str(user)
    assert tok.encode("<|im_start|>a cat 猫") == QwenTokenizer.from_file(SHIPPED_FILE).encode("<|im_start|>a cat 猫")


def test_a_file_that_is_not_a_qwen_vocabulary_is_refused(tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(ModelLoadError, match="not a usable Qwen tokenizer"):
        QwenTokenizer.from_file(bad)


def test_missing_shipped_copy_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr("nodes.models.qwen_tokenizer.SHIPPED_FILE", tmp_path / "gone.json.gz")
    with pytest.raises(ModelLoadError, match="needs Qwen's tokenizer"):
        qwen_tokenizer([tmp_path])
