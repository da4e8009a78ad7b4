"""T5TokenizerOptions: our Flux T5 chunking with the node's options equals ComfyUI 0.3.64's SDTokenizer with
the Flux T5 settings and the same options (tests/nodes/fixtures/comfyui_t5_tokenizer_options.json, recorded
by scripts/record_comfyui_t5_tokenizer_options.py with a one-id-per-character stand-in vocabulary), and the
node puts the options on the CLIP for every T5 type, as ComfyUI's node does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cluster.refs import ModelRef
from nodes.library.cond import T5TokenizerOptions
from nodes.models.flux_text import T5_RULES
from nodes.models.flux_tokenize import tokenize_weighted, with_tokenizer_options

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_t5_tokenizer_options.json").read_text())


def chars(segment: str) -> list[int]:
    return [ord(c) % 97 + 2 for c in segment if c != " "]


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: f"{c['text'][:12]!r}-{sorted(c['options'].values())}")
def test_padding_equals_comfyuis(case):
    rules = with_tokenizer_options(T5_RULES, case["options"], "t5xxl")
    ours = [[[t, w] for t, w in chunk] for chunk in tokenize_weighted(case["text"], chars, rules)]
    assert ours == case["chunks"]


def test_node_sets_the_options_of_every_t5_type():
    clip = ModelRef("text_encoder", "flux", ("a.safetensors",), ("0" * 64,))
    (out,) = T5TokenizerOptions().execute(clip, 3, 0)
    options = dict(out.option("tokenizer_options"))
    assert options["t5xxl_min_padding"] == 3 and options["t5xxl_min_length"] == 0
    assert {k.rsplit("_min_", 1)[0] for k in options} == {"t5xxl", "pile_t5xl", "t5base", "mt5xl", "umt5xxl"}
    (again,) = T5TokenizerOptions().execute(out, 1, 2)
    assert dict(again.option("tokenizer_options"))["t5xxl_min_length"] == 2
