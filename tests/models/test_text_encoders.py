"""CLIP text encoders with ComfyUI's semantics: weights, clip skip, SDXL concat + pooled, separate files."""

from __future__ import annotations

import torch
from safetensors.torch import save_file

from nodes.models import clip as C
from nodes.models.loader import load_text_encoder
from nodes.models.safetensors_io import load_state_dict

SD1, SDXL = "checkpoints/sd1-tiny.safetensors", "checkpoints/sdxl-tiny.safetensors"


def test_sd1_shapes_and_clip_skip(make_ref):
    te = load_text_encoder(make_ref("text_encoder", SD1))
    tokens = te.tokenize("a photo of a cat")
    cond, pooled = te.encode(tokens)
    assert cond.shape == (1, 77, 32) and pooled.shape == (1, 32)
    last = load_text_encoder(make_ref("text_encoder", SD1, layer=-1)).encode(tokens)[0]
    skip = load_text_encoder(make_ref("text_encoder", SD1, layer=-2)).encode(tokens)[0]
    assert torch.equal(last, cond)  # -1 is the final-normed last layer, the default
    assert not torch.allclose(skip, cond)
    # SD1 normalises the penultimate layer with the final layer norm, as ComfyUI does.
    side = te.sides["l"]
    ids = torch.tensor([[t for t, _ in tokens["l"][0]]])
    hidden = side.text_model(input_ids=ids, output_hidden_states=True).hidden_states[-2]
    torch.testing.assert_close(skip, side.text_model.final_layer_norm(hidden))


def test_prompt_weights_interpolate_from_the_empty_prompt(make_ref):
    te = load_text_encoder(make_ref("text_encoder", SD1))
    plain = te.encode(te.tokenize("red fox"))[0]
    weighted = te.encode(te.tokenize("(red fox:1.5)"))[0]
    empty_row = te.sides["l"].tokenizer.empty_tokens(77)
    z_empty = te.sides["l"].forward_ids(torch.tensor([empty_row]), None)[0]
    n = 1 + len(te.sides["l"].tokenizer.bpe.encode("red fox"))  # start token + the weighted tokens
    expected = (plain[:, 1:n] - z_empty[:, 1:n]) * 1.5 + z_empty[:, 1:n]
    torch.testing.assert_close(weighted[:, 1:n], expected)
    torch.testing.assert_close(weighted[:, n:], plain[:, n:])
    assert te.encode(te.tokenize("x" * 100))[0].shape == (1, 154, 32)


def test_sdxl_concatenates_penultimate_l_and_g_and_pools_g(make_ref):
    te = load_text_encoder(make_ref("text_encoder", SDXL))
    tokens = te.tokenize("a castle")
    assert set(tokens) == {"l", "g"} and tokens["g"][0][-1][0] == 0 and tokens["l"][0][-1][0] == 513
    cond, pooled = te.encode(tokens)
    assert cond.shape == (1, 77, 32 + 48) and pooled.shape == (1, 32)
    assert torch.equal(load_text_encoder(make_ref("text_encoder", SDXL, layer=-2)).encode(tokens)[0], cond)
    assert not torch.equal(load_text_encoder(make_ref("text_encoder", SDXL, layer=-1)).encode(tokens)[0], cond)
    g = te.sides["g"]
    ids = torch.tensor([[t for t, _ in tokens["g"][0]]])
    out = g.module(input_ids=ids, output_hidden_states=True)
    torch.testing.assert_close(cond[..., 32:], out.hidden_states[-2])  # no final norm for SDXL
    end = [t for t, _ in tokens["g"][0]].index(513)
    torch.testing.assert_close(pooled, g.module.text_projection(out.last_hidden_state[:, end]))


def test_open_clip_key_round_trip(sd_models):
    sd = load_state_dict(sd_models / SDXL)
    oc = {
        k[len("conditioner.embedders.1.model.") :]: v
        for k, v in sd.items()
        if k.startswith("conditioner.embedders.1.model.")
    }
    back = C.hf_to_open_clip(C.open_clip_to_hf(oc))
    assert back.keys() == oc.keys() and all(torch.equal(back[k], oc[k]) for k in oc)


def test_separate_files_equal_the_checkpoint(sd_models, tmp_path, make_ref):
    ck = load_text_encoder(make_ref("text_encoder", SD1))
    single = load_text_encoder(make_ref("text_encoder", "text_encoders/sd1-tiny-clip.safetensors"))
    tokens = ck.tokenize("a boat")
    assert torch.equal(single.encode(tokens)[0], ck.encode(tokens)[0])
    # DualCLIPLoader: CLIP-L and CLIP-G in HF layout, given in either order.
    sd = load_state_dict(sd_models / SDXL)
    l_file, g_file = tmp_path / "clip_l.safetensors", tmp_path / "clip_g.safetensors"
    save_file(
        {
            k.replace("conditioner.embedders.0.transformer.", ""): v
            for k, v in sd.items()
            if k.startswith("conditioner.embedders.0.")
        },
        str(l_file),
    )
    g = C.open_clip_to_hf(sd, "conditioner.embedders.1.model.")
    save_file({("" if k == "text_projection.weight" else "text_model.") + k: v for k, v in g.items()}, str(g_file))
    xl = load_text_encoder(make_ref("text_encoder", SDXL))
    dual = load_text_encoder(make_ref("text_encoder", str(g_file), str(l_file), clip_type="sdxl"))
    tokens = xl.tokenize("a boat")
    for a, b in zip(dual.encode(tokens), xl.encode(tokens)):
        assert torch.equal(a, b)
