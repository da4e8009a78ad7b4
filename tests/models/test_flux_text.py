"""Flux's text encoder: ComfyUI's CLIP-L + T5 tokenization and encoding on the tiny demo files."""

from __future__ import annotations

import pytest
import torch

from cluster.refs import ModelRef, file_digest
from nodes.models.errors import ModelLoadError
from nodes.models.flux_demo import build_demo_flux
from nodes.models.flux_text import find_clip_tokenizer, load_text_encoder
from nodes.models.flux_tokenize import ChunkRules, parse_weights, tokenize_weighted
from nodes.models.safetensors_io import load_state_dict


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    paths = build_demo_flux(tmp_path_factory.mktemp("models"))
    return {p.parent.name + "/" + p.name: str(p) for p in paths}


def _ref(*sources: str) -> ModelRef:
    return ModelRef("text_encoder", "flux", sources, tuple(file_digest(s) for s in sources))


@pytest.fixture(scope="module")
def te(files):
    ck = files["checkpoints/flux-tiny.safetensors"]
    return load_text_encoder(_ref(ck), [load_state_dict(ck)])


def test_weight_syntax():
    assert parse_weights("a (b:1.5) ((c)) \\(d\\)".replace("\\(", "\0\2").replace("\\)", "\0\1")) == [
        ("a ", 1.0),
        ("b", 1.5),
        (" ", 1.0),
        ("c", pytest.approx(1.21)),
        (" \0\2d\0\1", 1.0),
    ]


def test_tokenize_follows_comfyui_windows(te):
    tokens = te.tokenize("a photo of a cat")
    (l,), (t5,) = tokens["l"], tokens["t5xxl"]
    assert len(l) == 77 and l[0] == (512, 1.0) and l[-1] == (513, 1.0)
    assert len(t5) == 256  # T5 is padded to at least 256 tokens
    ids = [t for t, _ in t5]
    end = ids.index(1)
    assert end > 0 and set(ids[end + 1 :]) == {0} and 0 not in ids[:end]


def test_long_prompts_split_into_clip_windows_but_one_t5_sequence(te):
    tokens = te.tokenize(" ".join(["cat"] * 100))  # 100 words of 3 byte tokens + </w>
    assert len(tokens["l"]) > 1 and all(len(w) == 77 for w in tokens["l"])
    assert len(tokens["t5xxl"]) == 1 and len(tokens["t5xxl"][0]) == 256


def test_chunking_moves_short_segments_whole():
    rules = ChunkRules(start=100, end=101, pad=0, max_length=6, pad_to_max_length=True)
    enc = lambda s: [ord(c) for c in s.strip()]
    windows = tokenize_weighted("ab(cde:2)", enc, rules)
    assert windows == [
        [(100, 1.0), (97, 1.0), (98, 1.0), (101, 1.0), (0, 1.0), (0, 1.0)],
        [(100, 1.0), (99, 2.0), (100, 2.0), (101, 2.0), (101, 1.0), (0, 1.0)],
    ]


def test_encode_shapes(te):
    cond, pooled = te.encode(te.tokenize("a red cat"))
    assert cond.shape == (1, 256, 32) and pooled.shape == (1, 32)
    assert cond.dtype == torch.float32 and torch.isfinite(cond).all()


def test_weights_change_only_weighted_tokens(te):
    plain, p1 = te.encode(te.tokenize("a red cat"))
    same, _ = te.encode(te.tokenize("a red (cat:1.0)"))
    weighted, p2 = te.encode(te.tokenize("a red (cat:1.5)"))
    assert torch.allclose(plain, same, atol=1e-6)
    changed = (weighted - plain).abs().amax(dim=-1)[0] > 1e-6
    n_cat = len(te.tokenizers["t5xxl"]("cat"))
    assert changed.sum().item() == n_cat
    assert torch.equal(p1, p2)  # the pooled vector ignores weights


def test_dual_clip_files_equal_checkpoint(te, files):
    clip, t5 = files["text_encoders/flux-tiny-clip_l.safetensors"], files["text_encoders/flux-tiny-t5.safetensors"]
    dual = load_text_encoder(_ref(t5, clip), [load_state_dict(t5), load_state_dict(clip)])
    a, b = te.encode(te.tokenize("night city")), dual.encode(dual.tokenize("night city"))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_clip_set_last_layer_changes_t5_states(te, files):
    ck = files["checkpoints/flux-tiny.safetensors"]
    skip = load_text_encoder(_ref(ck).with_option("layer", -2), [load_state_dict(ck)])
    a, b = te.encode(te.tokenize("a dog")), skip.encode(skip.tokenize("a dog"))
    assert not torch.allclose(a[0], b[0]) and torch.equal(a[1], b[1])


def test_missing_t5_is_a_clear_error(files):
    clip = files["text_encoders/flux-tiny-clip_l.safetensors"]
    with pytest.raises(ModelLoadError, match="t5xxl"):
        load_text_encoder(_ref(clip), [load_state_dict(clip)])


def test_real_clip_l_without_tokenizer_file_uses_the_shipped_vocab(tmp_path, monkeypatch):
    """A real CLIP-L (49,408 embeddings) with no tokenizer beside it and no open_clip: OpenAI's ids from the
    vocabulary shipped with the project; an unknown vocabulary size is a clear error."""
    monkeypatch.delenv("COMFY_CLUSTER_CLIP_VOCAB", raising=False)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    tokenize = find_clip_tokenizer(str(tmp_path / "clip_l.safetensors"), 49408, None)
    assert tokenize("a photo of a cat") == [320, 1125, 539, 320, 2368]
    with pytest.raises(ModelLoadError, match="1000 token embeddings"):
        find_clip_tokenizer(str(tmp_path / "clip_l.safetensors"), 1000, None)


def test_t5_without_tokenizer_is_a_clear_error(files, tmp_path):
    # The same weights in a file without the config metadata: no tokenizer can be found for them.
    from safetensors.torch import save_file

    clip, t5 = files["text_encoders/flux-tiny-clip_l.safetensors"], files["text_encoders/flux-tiny-t5.safetensors"]
    bare = tmp_path / "t5.safetensors"
    save_file(load_state_dict(t5), str(bare))
    bare_clip = tmp_path / "clip.safetensors"
    save_file(load_state_dict(clip), str(bare_clip))
    with pytest.raises(ModelLoadError, match="no T5 tokenizer found"):
        load_text_encoder(_ref(str(bare_clip), str(bare)), [load_state_dict(bare_clip), load_state_dict(bare)])


def test_real_vocab_clip_l_and_t5_xxl_need_no_tokenizer_file(tmp_path, monkeypatch):
    """DualCLIPLoader files with CLIP-L's and T5-XXL's real vocabulary sizes (49,408 and 32,128 embeddings, tiny
    widths, no metadata) and no tokenizer anywhere: both tokenize with the vocabularies shipped with the project,
    to ComfyUI's ids (T5's from tests/models/fixtures/comfyui_t5_tokenizer.json), and encode."""
    from safetensors.torch import save_file
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    monkeypatch.delenv("COMFY_CLUSTER_CLIP_VOCAB", raising=False)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    torch.manual_seed(0)
    clip = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=49408,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            max_position_embeddings=77,
            hidden_act="quick_gelu",
            bos_token_id=49406,
            eos_token_id=49407,
            pad_token_id=49407,
        )
    )
    t5 = T5EncoderModel(
        T5Config(
            vocab_size=32128,
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=1,
            num_heads=4,
            feed_forward_proj="gated-gelu",
            is_encoder_decoder=False,
            use_cache=False,
        )
    )
    clip_path, t5_path = tmp_path / "clip_l.safetensors", tmp_path / "t5xxl_fp16.safetensors"
    save_file(
        {
            ("" if k.startswith("text_model.") else "text_model.") + k: v.contiguous()  # HF 4.x file names
            for k, v in clip.state_dict().items()
            if not k.endswith("position_ids")
        },
        str(clip_path),
    )
    save_file(
        {k: v.contiguous() for k, v in t5.state_dict().items() if k != "encoder.embed_tokens.weight"}, str(t5_path)
    )
    te = load_text_encoder(_ref(str(clip_path), str(t5_path)), [load_state_dict(clip_path), load_state_dict(t5_path)])
    tokens = te.tokenize("A photo of a cat")
    assert [t for t, _ in tokens["t5xxl"][0]][:7] == [71, 1202, 13, 3, 9, 1712, 1]
    assert [t for t, _ in tokens["l"][0]][:7] == [49406, 320, 1125, 539, 320, 2368, 49407]
    cond, pooled = te.encode(tokens)
    assert cond.shape == (1, 256, 32) and pooled.shape == (1, 32)
