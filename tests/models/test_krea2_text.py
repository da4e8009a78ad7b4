"""Krea 2's text encoder (CLIPLoader type krea2 on a Qwen3-VL file) against diffusers 0.42's Krea2Pipeline on the
same tiny weights: its token layout, and the conditioning it gives equal to the pipeline's
get_text_hidden_states (prompt padded in the middle, masked) wherever that is unmasked, and one transformer step
on each equal within 1e-5. No ComfyUI runnable here has Krea 2, so the reference is diffusers, not ComfyUI."""

from __future__ import annotations

import pytest
import torch
from diffusers import Krea2Pipeline
from safetensors.torch import load_file
from transformers import PreTrainedTokenizerFast

from nodes.loaders import CLIPLoader, make_ref
from nodes.models import loader
from nodes.models.krea2_demo import (
    build_demo_krea2,
    tiny_text_encoder,
    tiny_transformer,
)
from nodes.models.krea2_text import PREFIX, SUFFIX, tapped_layers


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("krea2_text")
    transformer, text, _ = build_demo_krea2(root)
    return {"transformer": transformer, "text": text}


@pytest.fixture(scope="module")
def encoder(files):
    return loader.load_text_encoder(make_ref("text_encoder", "krea2", [files["text"]], clip_type="krea2"))


@pytest.fixture(scope="module")
def pipe(encoder, files):
    """diffusers' pipeline with the tiny file's Qwen3-VL and our shipped Qwen2 vocabulary as an HF tokenizer."""
    ref = tiny_text_encoder()
    ref.load_state_dict(load_file(files["text"]), strict=False)  # lm_head is not in the file and not used
    p = Krea2Pipeline.__new__(Krea2Pipeline)
    p.tokenizer = PreTrainedTokenizerFast(tokenizer_object=encoder.tokenizer._tok, pad_token="<|endoftext|>")
    p.text_encoder = ref.model
    p.text_encoder_select_layers = (2, 5, 8)  # the 36-layer list's rule on 9 layers
    p.prompt_template_encode_prefix, p.prompt_template_encode_suffix = PREFIX, SUFFIX
    p.prompt_template_encode_start_idx, p.prompt_template_encode_num_suffix_tokens = 34, 5
    return p


def test_taps_of_the_released_encoder():
    assert tapped_layers(36) == (2, 5, 8, 11, 14, 17, 20, 23, 26, 29, 32, 35)  # diffusers' default list


def test_token_layout(encoder, pipe):
    ids = [t for t, _ in encoder.tokenize("a red fox")["qwen3vl_4b"][0]]
    prefix = pipe.tokenizer(PREFIX).input_ids
    assert len(prefix) == 34  # the pipeline's prompt_template_encode_start_idx
    assert ids == pipe.tokenizer(PREFIX + "a red fox").input_ids + pipe.tokenizer(SUFFIX).input_ids
    assert len(pipe.tokenizer(SUFFIX).input_ids) == 5


def test_clip_loader_type_krea2(files, monkeypatch):
    from nodes import loaders

    monkeypatch.setattr(loaders, "model_file", lambda folder, name, what: files["text"])
    (ref,) = CLIPLoader().load_clip("qwen3vl_4b_tiny.safetensors", "krea2")
    assert ref.arch == "krea2" and ref.option("clip_type") == "krea2"
    with pytest.raises(ValueError, match="type krea2"):
        CLIPLoader().load_clip("qwen3vl_4b_tiny.safetensors", "sd3")


def test_conditioning_and_step_equal_diffusers(encoder, pipe, files):
    torch.set_num_threads(1)
    prompt = "a small house by a lake, evening light"
    cond, pooled = encoder.encode(encoder.tokenize(prompt))
    assert pooled is None
    with torch.no_grad():
        hidden, mask = pipe.get_text_hidden_states(prompt, max_sequence_length=32, device=torch.device("cpu"))
    assert not bool(mask.all())  # the reference really pads in the middle
    ours = cond.unflatten(-1, (3, 32))
    assert ours.shape[1] == int(mask.sum())
    assert torch.allclose(ours[0], hidden[0][mask[0]], atol=1e-5, rtol=0)

    model = loader.load_diffusion_model(make_ref("diffusion_model", "krea2", [files["transformer"]]))
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(1, 16, 4, 6, generator=gen)
    sigma = torch.tensor([0.6])
    ref = tiny_transformer()
    pipe.patch_size, pipe.vae_scale_factor = 2, 8
    with torch.no_grad():
        got = model.apply(x, sigma, {"context": cond})
        packed = pipe._pack_latents(x, 1, 16, 4, 6)
        pos = Krea2Pipeline.prepare_position_ids(hidden.shape[1], 2, 3, x.device)
        out = ref(
            hidden_states=packed,
            encoder_hidden_states=hidden,
            timestep=sigma,
            position_ids=pos,
            encoder_attention_mask=mask,
            return_dict=False,
        )[0]
    expected = pipe._unpack_latents(out, 32, 48)[:, :, 0]
    assert torch.allclose(got, expected, atol=1e-5, rtol=0), (got - expected).abs().max()
