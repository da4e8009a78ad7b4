"""MiniMax H3's text encoder (CLIPLoader type minimax on a Qwen3-VL file): the raw prompt's ids with no template
and no special tokens (an empty prompt is <|endoftext|>), as the newest ComfyUI source tokenizes it, and the
conditioning equal to diffusers' MiniMax H3 prompt encoding (get_qwen3vl_prompt_embeds: hidden_states[layer] of an
untruncated model) on the tiny file's weights, within 1e-5."""

from __future__ import annotations

import pytest
import torch
from diffusers.modular_pipelines.minimax_h3.encoders import get_qwen3vl_prompt_embeds
from safetensors.torch import load_file

from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.detect import probe
from nodes.models.errors import ModelLoadError
from nodes.models.minimax_h3_demo import FILES, TEXT_DIM, TEXT_LAYERS, build_demo_minimax_h3, tiny_text_encoder
from nodes.models.minimax_h3_text import PAD, SUB
from nodes.models.qwen_tokenizer import qwen_tokenizer

PROMPT = "A red fox (jumps) over a log at dusk.\nAudio: wind, paws on leaves."


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("minimax-text") / "models"
    build_demo_minimax_h3(root)
    return root


@pytest.fixture(scope="module")
def encoder(files):
    return loader.load_text_encoder(
        make_ref("text_encoder", "minimax_h3", [files / FILES["text_encoder"]], clip_type="minimax")
    )


class _TextOnlyProcessor:
    """What diffusers asks its Qwen3-VL processor for on a text-only presentation: every row a text row (0)."""

    @staticmethod
    def create_mm_token_type_ids(batch: list[list[int]]) -> list[list[int]]:
        return [[0] * len(ids) for ids in batch]


def test_tokens_are_the_raw_prompt(encoder):
    ids = [t for t, _ in encoder.tokenize(PROMPT)[SUB][0]]
    assert ids == qwen_tokenizer().encode(PROMPT)  # no template, no special tokens
    assert encoder.tokenize("")[SUB] == [[(PAD, 1.0)]]


def test_conditioning_equals_diffusers(files, encoder):
    torch.set_num_threads(1)
    assert probe(files / FILES["text_encoder"]).arch == "qwen3vl"
    cond, pooled = encoder.encode(encoder.tokenize(PROMPT))
    # diffusers reads hidden_states[layer] of a deeper model: the file's layers plus one it never reaches
    reference = tiny_text_encoder(TEXT_LAYERS + 1)
    missing, unexpected = reference.load_state_dict(load_file(files / FILES["text_encoder"]), strict=False)
    assert not unexpected and all(
        k.startswith(("lm_head.", f"model.language_model.layers.{TEXT_LAYERS}.")) for k in missing
    )
    ids = qwen_tokenizer().encode(PROMPT)
    expected = get_qwen3vl_prompt_embeds(reference, _TextOnlyProcessor(), ids, {}, text_encoder_layer=TEXT_LAYERS)
    assert pooled is None and cond.shape == (1, len(ids), TEXT_DIM)
    torch.testing.assert_close(cond, expected.float(), atol=1e-5, rtol=1e-5)


def test_cliploader_type_minimax(files, tmp_path):
    import nodes
    from nodes import workspace as ws_module

    previous = ws_module._active
    ws = ws_module.activate(ws_module.Workspace(tmp_path / "ws").create())
    try:
        build_demo_minimax_h3(ws.models_dir)
        loader_node = nodes.NODE_CLASS_MAPPINGS["CLIPLoader"]()
        assert "minimax" in loader_node.INPUT_TYPES()["required"]["type"][0]
        (ref,) = loader_node.load_clip(FILES["text_encoder"].split("/")[1], "minimax")
        assert ref.arch == "minimax_h3"
        with pytest.raises(ValueError, match="type minimax"):
            loader_node.load_clip(FILES["text_encoder"].split("/")[1], "wan")
    finally:
        ws_module._active = previous


def test_minimax_type_needs_qwen3vl(files):
    with pytest.raises(ModelLoadError):
        loader.load_text_encoder(make_ref("text_encoder", "minimax_h3", [files / FILES["vae"]], clip_type="minimax"))
