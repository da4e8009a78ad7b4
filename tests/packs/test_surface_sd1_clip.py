"""comfy.sd1_clip's prompt-weight parsing and embedding loaders, comfy.sd.StyleModel and
comfy.model_base.BaseModel.apply_model: the names ComfyUI-Image-Saver, ComfyUI_ExtraModels,
comfyui-tooling-nodes and ComfyUI-TiledDiffusion need at import. Expected values follow ComfyUI 0.3.64's
comfy/sd1_clip.py (derived by reading its code)."""

from __future__ import annotations

import inspect
import logging
import zipfile
from types import SimpleNamespace

import pytest
import safetensors.torch
import torch

from comfy_bridge.compat.comfy import model_base, sd, sd1_clip
from comfy_bridge.packs.origin import UnsupportedFeature


@pytest.mark.parametrize(
    "text,weight,expected",
    [
        ("(a:1.2) b", 1.0, [("a", 1.2), (" b", 1.0)]),
        ("a (b:1.3) ((c))", 1.0, [("a ", 1.0), ("b", 1.3), (" ", 1.0), ("c", 1.0 * 1.1 * 1.1)]),
        ("(a)", 2.0, [("a", 2.0 * 1.1)]),
        ("(a:x)", 1.0, [("a:x", 1.1)]),  # not a number: the colon stays text, the group weighs 1.1
        ("(:1.5)", 1.0, [(":1.5", 1.1)]),  # a colon first is not a weight
        ("((a:0.5) b)", 1.0, [("a", 0.5), (" b", 1.1)]),
        ("a) b", 1.0, [("a) b", 1.0)]),  # a stray ")" is text
        ("(a", 1.0, [("(a", 1.0)]),  # an unclosed "(" is text
        ("()", 1.0, []),
        ("", 1.0, []),
    ],
)
def test_token_weights_matches_comfyui(text, weight, expected):
    assert sd1_clip.token_weights(text, weight) == expected


def test_parse_parentheses_splits_top_level_groups():
    assert sd1_clip.parse_parentheses("a (b (c)) d") == ["a ", "(b (c))", " d"]
    assert sd1_clip.parse_parentheses("(x)(y)") == ["(x)", "(y)"]
    assert sd1_clip.parse_parentheses("") == []


def test_escaped_parentheses_are_text_not_weights():
    escaped = sd1_clip.escape_important("\\(a\\) (b)")
    assert escaped == "\0\2a\0\1 (b)"
    weighted = sd1_clip.token_weights(escaped, 1.0)
    assert weighted == [("\0\2a\0\1 ", 1.0), ("b", 1.1)]
    assert sd1_clip.unescape_important(weighted[0][0]) == "(a) "


# ---- textual-inversion embeddings ----------------------------------------------------------------------


def rows(n: int, width: int = 768, start: float = 0.0) -> torch.Tensor:
    return torch.arange(n * width, dtype=torch.float32).reshape(n, width) + start


def test_load_embed_reads_safetensors_by_name_without_extension(tmp_path):
    safetensors.torch.save_file({"emb_params": rows(2)}, tmp_path / "style.safetensors")
    torch.testing.assert_close(sd1_clip.load_embed("style", str(tmp_path), 768), rows(2))


def test_load_embed_reads_a1111_string_to_param(tmp_path):
    torch.save({"string_to_param": {"*": rows(3)}, "name": "x"}, tmp_path / "ti.pt")
    torch.testing.assert_close(sd1_clip.load_embed("ti", [str(tmp_path)], 768), rows(3))


def test_load_embed_list_keeps_tensors_of_the_encoder_width(tmp_path):
    torch.save([{"clip_l": rows(1), "clip_g": rows(1, 1280)}, {"v": rows(2, 768, 5.0)}], tmp_path / "l.pt")
    out = sd1_clip.load_embed("l.pt", str(tmp_path), 768)
    torch.testing.assert_close(out, torch.cat([rows(1), rows(2, 768, 5.0)]))


def test_load_embed_picks_the_key_then_bundled_lora_embeddings(tmp_path):
    safetensors.torch.save_file({"clip_l": rows(1), "clip_g": rows(1, 1280)}, tmp_path / "xl.safetensors")
    torch.testing.assert_close(sd1_clip.load_embed("xl", str(tmp_path), 1280, embed_key="clip_g"), rows(1, 1280))
    bundle = {
        "lora_unet.w": torch.zeros(3),
        "bundle_emb.a.string_to_param.*": rows(1),
        "bundle_emb.b.string_to_param.*": rows(2, 768, 9.0),
    }
    safetensors.torch.save_file(bundle, tmp_path / "lora.safetensors")
    torch.testing.assert_close(sd1_clip.load_embed("lora", str(tmp_path), 768), torch.cat([rows(1), rows(2, 768, 9.0)]))


def test_load_embed_searches_subdirectories_and_stays_inside(tmp_path):
    (tmp_path / "emb" / "sub").mkdir(parents=True)
    torch.save({"string_to_param": {"*": rows(1)}}, tmp_path / "emb" / "sub" / "deep.pt")
    torch.save({"string_to_param": {"*": rows(1)}}, tmp_path / "outside.pt")
    emb = str(tmp_path / "emb")
    assert set(sd1_clip.expand_directory_list([emb])) == {emb, str(tmp_path / "emb" / "sub")}
    torch.testing.assert_close(sd1_clip.load_embed("deep", emb, 768), rows(1))
    assert sd1_clip.load_embed("../outside", emb, 768) is None  # no climbing out of the directory
    assert sd1_clip.load_embed("missing", emb, 768) is None


def write_storage_zip(path, *entries: bytes) -> None:
    with zipfile.ZipFile(path, "w") as z:
        for i, data in enumerate(entries):
            z.writestr(f"archive/data/{i}", data)


def test_safe_load_embed_zip_reads_the_last_big_enough_storage(tmp_path):
    # reversed order: entry 2 (too small) is skipped, entry 1 (SD2: 2048 floats, not a multiple of 768) read
    write_storage_zip(
        tmp_path / "a.pt", rows(1).numpy().tobytes(), rows(2, 1024).numpy().tobytes(), torch.zeros(10).numpy().tobytes()
    )
    torch.testing.assert_close(sd1_clip.safe_load_embed_zip(str(tmp_path / "a.pt")), rows(2, 1024))
    write_storage_zip(tmp_path / "b.pt", rows(3).numpy().tobytes())
    torch.testing.assert_close(sd1_clip.safe_load_embed_zip(str(tmp_path / "b.pt")), rows(3))
    # a file torch.load refuses falls back to the raw storages
    torch.testing.assert_close(sd1_clip.load_embed("b", str(tmp_path), 768), rows(3))


def test_unreadable_embedding_is_skipped_with_a_warning(tmp_path, caplog):
    (tmp_path / "bad.pt").write_bytes(b"not an embedding")
    with caplog.at_level(logging.WARNING):
        assert sd1_clip.load_embed("bad", str(tmp_path), 768) is None
    assert "bad" in caplog.text


# ---- comfy.sd.StyleModel, BaseModel.apply_model -------------------------------------------------------


def test_style_model_get_cond_runs_the_module_on_the_vision_tokens():
    from nodes.models.style_model import ReduxEncoder

    module = ReduxEncoder(8, 4)
    hidden = torch.randn(1, 3, 8)
    out = sd.StyleModel(module).get_cond(SimpleNamespace(last_hidden_state=hidden))
    torch.testing.assert_close(out, module(hidden))


def test_base_model_apply_model_exists_and_refuses_clearly():
    params = inspect.signature(model_base.BaseModel.apply_model).parameters
    assert list(params)[:3] == ["self", "x", "t"] and "transformer_options" in params
    model = object.__new__(model_base.SDXL)
    with pytest.raises(UnsupportedFeature, match="apply_model"):
        model.apply_model(torch.zeros(1), torch.zeros(1))


def test_nodes_sag_gaussian_blur_2d_is_a_normalised_reflect_padded_blur():
    from comfy_bridge.compat.comfy_extras import nodes_sag

    flat = torch.full((1, 2, 8, 8), 0.7)
    torch.testing.assert_close(nodes_sag.gaussian_blur_2d(flat, 3, 1.0), flat)  # a constant stays constant
    impulse = torch.zeros(1, 1, 9, 9)
    impulse[0, 0, 4, 4] = 1.0
    out = nodes_sag.gaussian_blur_2d(impulse, 3, 1.0)
    k = torch.exp(-0.5 * torch.tensor([-1.0, 0.0, 1.0]) ** 2)
    k = k / k.sum()
    torch.testing.assert_close(out[0, 0, 3:6, 3:6], k[:, None] * k[None, :])
    assert out.shape == impulse.shape
