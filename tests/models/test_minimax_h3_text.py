"""MiniMax H3's text encoder (CLIPLoader type minimax on a Qwen3-VL file): the raw prompt's ids with no template
and no special tokens (an empty prompt is <|endoftext|>), as the newest ComfyUI source tokenizes it, and the
conditioning equal to diffusers' MiniMax H3 prompt encoding (get_qwen3vl_prompt_embeds: hidden_states[layer] of an
untruncated model) on the tiny file's weights, within 1e-5. With first/last frames (fl2va) the presentation, the
conditioning and the rows' modality tags equal diffusers' own fl2va text-encoder step (transformers'
Qwen3VLModel with the pictures' pixels, grid and 3-axis positions inside), given the pixels ComfyUI's
preprocessing makes (nodes.models.qwen3vl_vision)."""

from __future__ import annotations

import gzip
from types import SimpleNamespace

import pytest
import torch
from diffusers.modular_pipelines import PipelineState
from diffusers.modular_pipelines.minimax_h3.encoders import MiniMaxH3FL2VATextEncoderStep, get_qwen3vl_prompt_embeds
from safetensors.torch import load_file

from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.detect import probe
from nodes.models.errors import ModelLoadError
from nodes.models.minimax_h3_demo import FILES, TEXT_DIM, TEXT_LAYERS, build_demo_minimax_h3, tiny_text_encoder
from nodes.models.minimax_h3_text import IMAGE_PAD, PAD, SUB, VISION_END, VISION_START
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


def _untruncated(files):
    """The file's Qwen3-VL with one decoder layer more, which diffusers' hidden_states[layer] never reaches."""
    reference = tiny_text_encoder(TEXT_LAYERS + 1)
    missing, unexpected = reference.load_state_dict(load_file(files / FILES["text_encoder"]), strict=False)
    assert not unexpected and all(
        k.startswith(("lm_head.", f"model.language_model.layers.{TEXT_LAYERS}.")) for k in missing
    )
    return reference


def test_picture_labels_and_vision_blocks_come_first(encoder):
    ids = [t for t, _ in encoder.tokenize("a fox", images=2)[SUB][0]]
    label = [qwen_tokenizer().encode(f"<Picture {i}>: ") for i in (1, 2)]
    block = [VISION_START, IMAGE_PAD, VISION_END]
    assert ids == label[0] + block + label[1] + block + qwen_tokenizer().encode("a fox")
    assert [t for t, _ in encoder.tokenize("", images=1)[SUB][0]] == label[0] + block  # no pad after a picture


@pytest.mark.parametrize("sizes", [[(64, 96)], [(64, 96), (96, 64)]])
def test_first_last_frame_conditioning_equals_diffusers(files, encoder, tmp_path, sizes):
    """Pictures already on whole 32-pixel cells, so ComfyUI's preprocessing and transformers' processor (no
    resize) give the same pixels; diffusers' step builds its own presentation, tags and Qwen3-VL call."""
    from transformers import Qwen2TokenizerFast
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    torch.set_num_threads(1)
    vocab = tmp_path / "tokenizer.json"
    vocab.write_bytes(gzip.decompress(open(qwen_tokenizer().source, "rb").read()))
    processor = SimpleNamespace(
        image_processor=Qwen2VLImageProcessorPil(
            do_resize=False, do_rescale=False, image_mean=[0.5] * 3, image_std=[0.5] * 3, patch_size=16, merge_size=2
        ),
        create_mm_token_type_ids=lambda batch: [[int(t == IMAGE_PAD) for t in ids] for ids in batch],
    )
    components = SimpleNamespace(
        tokenizer=Qwen2TokenizerFast(tokenizer_file=str(vocab)),
        processor=processor,
        text_encoder=_untruncated(files),
        text_tag=1,
        video_tag=0,
        text_encoder_layer=TEXT_LAYERS,
        _execution_device=torch.device("cpu"),
    )
    g = torch.Generator().manual_seed(4)
    pictures = [torch.rand(1, h, w, 3, generator=g) for h, w in sizes]
    state = PipelineState()
    state.set("prompt", PROMPT)
    state.set("keyframes", [p[0].movedim(-1, 0).numpy() for p in pictures])
    _, state = MiniMaxH3FL2VATextEncoderStep()(components, state)

    tokens = encoder.tokenize(PROMPT, images=len(pictures))
    cond, pooled = encoder.encode(tokens, pictures)
    tags = encoder.row_tags(tokens, pictures)
    expected = state.get("prompt_embeds").float()
    assert pooled is None and cond.shape == expected.shape
    assert cond.shape[1] > len(tokens[SUB][0])  # each picture's tokens took its <|image_pad|>'s place
    torch.testing.assert_close(cond, expected, atol=1e-5, rtol=1e-5)
    assert torch.equal(tags, state.get("text_token_tags"))
    assert (tags == 0).sum() == sum(h * w // 1024 + 2 for h, w in sizes)  # merged tokens and start/end tokens


def test_pictures_need_a_vision_tower(files, encoder):
    sd = {k: v for k, v in load_file(files / FILES["text_encoder"]).items() if ".visual." not in k}
    from cluster.refs import ModelRef
    from nodes.models.minimax_h3_text import MiniMaxH3TextEncoder, load_text_encoder

    text_only = load_text_encoder(ModelRef("text_encoder", "minimax_h3", ("te.safetensors",), ("0",)), sd)
    assert isinstance(text_only, MiniMaxH3TextEncoder) and "visual" not in text_only.modules
    with pytest.raises(ValueError, match="no vision tower"):
        text_only.encode(text_only.tokenize("x", images=1), [torch.rand(1, 32, 32, 3)])
    with pytest.raises(ValueError, match="2 pictures for 1 vision blocks"):
        encoder.encode(encoder.tokenize("x", images=1), [torch.rand(1, 32, 32, 3)] * 2)
