"""VAEEncodeForInpaint, InpaintModelConditioning and VAEEncodeTiled against ComfyUI 0.3.64's own functions
(tests/nodes/fixtures/comfyui_vae_encoders.json.xz, recorded by scripts/record_comfyui_vae_encoders.py): with a
VAE that returns the pixels it would encode, the pixels each inpainting node hands to the VAE, its noise mask
and its conditioning options, bit for bit; the tiled encode's assembly of tiles with a toy encoder within 16
float32 ulps of the largest value, as tests/nodes/comfyui_fixtures.py bounds short chains of float32 ops (its
pooling and tanh round differently on different CPUs: ComfyUI's own tiled outputs on an AVX-512 CPU no longer
matched the SHA-256s recorded on another machine, their sums 1e-5 apart). The VAE itself is ours (VAEEncode's),
exercised end to end in tests/e2e/test_conditioning_family.py."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch

from cluster.refs import ModelRef
from nodes.library import inpaint
from nodes.modelfns.vae import tiled_encode
from tests.float_tolerance import ulps_of_largest
from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_vae_encoders.json.xz")


INPUTS = {k: tensor(v) for k, v in FIXTURE["inputs"].items()}
VAE = ModelRef("vae", "sd1", ("demo.safetensors",), ("0" * 64,))


def same(t: torch.Tensor, rec: dict) -> bool:
    t = t.detach().to(torch.float32).contiguous()
    return list(t.shape) == rec["shape"] and hashlib.sha256(t.numpy().tobytes()).hexdigest() == rec["sha256"]


@pytest.fixture
def echo_vae(monkeypatch):
    """The VAE call returns the pixels it is given, like the recording's stand-in."""

    async def echo(fn, ref, input_name, inputs, params):
        assert fn == "vae_encode" and ref is VAE
        return {"latent": inputs["pixels"].clone()}

    monkeypatch.setattr(inpaint, "call_model_fn", echo)


INPAINT = [c for c in FIXTURE["cases"] if c["class"] != "VAEEncodeTiled"]
TILED = [c for c in FIXTURE["cases"] if c["class"] == "VAEEncodeTiled"]


@pytest.mark.parametrize(
    "case",
    INPAINT,
    ids=lambda c: f"{c['class']}-{c['pixels']}-{c['mask']}-{c.get('grow_mask_by', c.get('noise_mask_flag'))}",
)
def test_inpaint_encoders_match_comfyui(case, echo_vae):
    pixels, mask = INPUTS[case["pixels"]], INPUTS[case["mask"]]
    if case["class"] == "VAEEncodeForInpaint":
        (latent,) = asyncio.run(inpaint.VAEEncodeForInpaint().encode(VAE, pixels, mask, case["grow_mask_by"]))
        assert same(latent["samples"], case["samples"])
        assert same(latent["noise_mask"], case["noise_mask"])
        return
    positive = [[torch.zeros(1, 2, 4), {"strength": 0.5}]]
    negative = [[torch.ones(1, 2, 4), {}]]
    pos, neg, latent = asyncio.run(
        inpaint.InpaintModelConditioning().encode(positive, negative, pixels, VAE, mask, case["noise_mask_flag"])
    )
    assert same(latent["samples"], case["samples"])
    if case["noise_mask"] is None:
        assert "noise_mask" not in latent
    else:
        assert same(latent["noise_mask"], case["noise_mask"])
    for out, keys in ((pos, case["positive_keys"]), (neg, case["negative_keys"])):
        assert sorted(out[0][1]) == keys
        assert same(out[0][1]["concat_latent_image"], case["concat_latent_image"])
        assert same(out[0][1]["concat_mask"], case["concat_mask"])
    assert positive[0][1] == {"strength": 0.5}, "the input conditioning was modified"
    assert torch.equal(pixels, INPUTS[case["pixels"]])


def stripes(shape: list[int]) -> torch.Tensor:
    """The recording's tiled-encode input (integer arithmetic: the same values in any process)."""
    return (((torch.arange(int(np.prod(shape))) * 37 + 11) % 256).float() / 255.0).reshape(shape)


def toy_encode(image: torch.Tensor) -> torch.Tensor:
    """The recording's toy encoder, on an IMAGE tile [B,H,W,C] as our VAEs take it."""
    weight = torch.linspace(-1.0, 1.0, 12).reshape(4, 3, 1, 1)
    x = image.movedim(-1, 1)
    return torch.tanh(torch.nn.functional.conv2d(torch.nn.functional.avg_pool2d(x, 8), weight))


@pytest.mark.parametrize("case", TILED, ids=lambda c: f"{c['shape']}-tile{c['tile_size']}-overlap{c['overlap']}")
def test_tiled_encode_assembles_tiles_as_comfyui(case):
    pixels = stripes(case["shape"])
    assert same(pixels, case["pixels"])
    ours = tiled_encode(toy_encode, pixels, case["tile_size"], case["overlap"], 8, 4)
    theirs = tensor(case["values"])
    assert ours.shape == theirs.shape
    diff = (ours - theirs).abs().max().item()
    assert diff <= ulps_of_largest(theirs, 16), diff


def test_tiled_encode_refuses_an_overlap_of_half_a_tile(echo_vae):
    from nodes.library.vae_tiled import VAEEncodeTiled

    with pytest.raises(ValueError, match="overlap"):
        asyncio.run(VAEEncodeTiled().encode(VAE, torch.rand(1, 64, 64, 3), 64, 32))
