"""LTX-2.5's diffusion video decoder (nodes/models/ltx25_decoder.py) against ComfyUI's own NADiffusionDecoder, run at
development time on the same tiny seeded network (tests/models/fixtures/comfyui_ltx25_decoder.json, recorded by
scripts/record_ltx25_decoder.py; per-axis-different kernels and a non-cubic latent, so an axis mix-up shows)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from nodes.models.ltx25_decoder import DiffusionDecoder, rope_split
from scripts.record_ltx25_decoder import constructor_args, latent, seeded_weights

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_ltx25_decoder.json").read_text())

pytest.importorskip("comfy_kitchen")


def tiny() -> DiffusionDecoder:
    decoder = DiffusionDecoder(**constructor_args(FIXTURE["sizes"])).eval()
    names = [(k, v.shape) for k, v in decoder.state_dict().items()]
    decoder.load_state_dict(seeded_weights(names, FIXTURE["seed"]))
    return decoder


def test_decoded_pixels_equal_comfyuis() -> None:
    torch.set_num_threads(1)
    decoder = tiny()
    z = latent(FIXTURE["seed"])
    assert list(z.shape) == FIXTURE["latent_shape"]
    with torch.no_grad():
        context = decoder.context(z)
        pixels = decoder(z)
    assert list(context.shape) == FIXTURE["context_shape"]
    assert float(context.double().sum()) == pytest.approx(FIXTURE["context_sum"], rel=1e-5)
    assert float(context.double().abs().sum()) == pytest.approx(FIXTURE["context_abs_sum"], rel=1e-6)
    want = np.frombuffer(base64.b64decode(FIXTURE["pixels"]), dtype=np.float32).reshape(FIXTURE["pixels_shape"])
    torch.testing.assert_close(pixels, torch.from_numpy(want.copy()), rtol=0, atol=1e-5)


def test_frame_counts_follow_the_causal_8x_rule() -> None:
    decoder = tiny()
    assert [decoder.output_frames(t) for t in (1, 2, 3)] == [1, 9, 17]
    assert FIXTURE["pixels_shape"][2] == decoder.output_frames(FIXTURE["latent_shape"][2])


def test_rotary_split_of_the_published_head() -> None:
    assert rope_split(64) == (16, 24, 24)  # the shipped decoder's head_dim
    assert rope_split(16) == (4, 6, 6)
