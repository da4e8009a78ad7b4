"""Latent nodes: empty latents, resize rules, batch slicing/repeating with seed offsets, noise masks."""

from __future__ import annotations

import pytest
import torch

from nodes.latent import (
    EmptyLatentImage,
    EmptySD3LatentImage,
    LatentFromBatch,
    LatentUpscale,
    LatentUpscaleBy,
    RepeatLatentBatch,
    SetLatentNoiseMask,
)
from nodes.upscale import common_upscale

# Several tests compare results bit for bit.
pytestmark = pytest.mark.usefixtures("fixed_threads")


def test_empty_latent_is_zero_4_channel_at_one_eighth():
    (out,) = EmptyLatentImage().generate(64, 40, 3)
    assert set(out) == {"samples", "downscale_ratio_spacial"} and out["downscale_ratio_spacial"] == 8  # today's
    assert out["samples"].shape == (3, 4, 5, 8)
    assert not out["samples"].any()


def test_empty_sd3_latent_has_16_channels():
    (out,) = EmptySD3LatentImage().generate(128, 64, 2)
    assert out["samples"].shape == (2, 16, 8, 16)
    assert not out["samples"].any()


def lat(b=2, c=4, h=8, w=8, **extra):
    return {"samples": torch.randn(b, c, h, w), **extra}


def test_latent_upscale_to_pixel_size():
    src = lat()
    (out,) = LatentUpscale().upscale(src, "bilinear", 128, 96, "disabled")
    assert out["samples"].shape == (2, 4, 12, 16)
    assert torch.equal(out["samples"], common_upscale(src["samples"], 16, 12, "bilinear", "disabled"))


def test_latent_upscale_zero_side_keeps_aspect():
    src = lat(h=8, w=16)
    (out,) = LatentUpscale().upscale(src, "nearest-exact", 0, 128, "disabled")
    assert out["samples"].shape[-2:] == (16, 32)  # width = round(16 * 128 / 8) = 256 px
    (out,) = LatentUpscale().upscale(src, "nearest-exact", 256, 0, "disabled")
    assert out["samples"].shape[-2:] == (16, 32)


def test_latent_upscale_has_a_64_pixel_floor():
    (out,) = LatentUpscale().upscale(lat(), "area", 8, 16, "disabled")
    assert out["samples"].shape[-2:] == (8, 8)


def test_latent_upscale_zero_zero_returns_input_unchanged():
    src = lat()
    (out,) = LatentUpscale().upscale(src, "bislerp", 0, 0, "center")
    assert out is src


def test_latent_upscale_keeps_other_keys_and_leaves_input_alone():
    mask = torch.ones(1, 1, 64, 64)
    src = lat(noise_mask=mask, batch_index=[5, 6])
    before = src["samples"].clone()
    (out,) = LatentUpscaleBy().upscale(src, "bislerp", 1.5)
    assert out["samples"].shape[-2:] == (12, 12)
    assert out["noise_mask"] is mask and out["batch_index"] == [5, 6]
    assert torch.equal(src["samples"], before) and src["samples"].shape[-2:] == (8, 8)


def test_latent_from_batch_slices_and_records_seed_offsets():
    src = lat(b=5)
    (out,) = LatentFromBatch().frombatch(src, 1, 3)
    assert torch.equal(out["samples"], src["samples"][1:4])
    assert out["batch_index"] == [1, 2, 3]


def test_latent_from_batch_clamps_index_and_length():
    src = lat(b=3)
    (out,) = LatentFromBatch().frombatch(src, 10, 5)
    assert torch.equal(out["samples"], src["samples"][2:3])
    assert out["batch_index"] == [2]


def test_latent_from_batch_keeps_existing_offsets():
    (out,) = LatentFromBatch().frombatch(lat(b=4, batch_index=[10, 11, 12, 13]), 2, 2)
    assert out["batch_index"] == [12, 13]


def test_latent_from_batch_masks():
    single = torch.rand(1, 1, 64, 64)
    (out,) = LatentFromBatch().frombatch(lat(b=4, noise_mask=single), 2, 2)
    assert torch.equal(out["noise_mask"], single) and out["noise_mask"] is not single
    cycled = torch.rand(2, 1, 64, 64)  # two masks for four items: m0 m1 m0 m1
    (out,) = LatentFromBatch().frombatch(lat(b=4, noise_mask=cycled), 1, 2)
    assert torch.equal(out["noise_mask"], torch.stack([cycled[1], cycled[0]]))


def test_repeat_latent_batch_repeats_samples_and_offsets():
    src = lat(b=2, batch_index=[3, 4])
    (out,) = RepeatLatentBatch().repeat(src, 3)
    assert torch.equal(out["samples"], torch.cat([src["samples"]] * 3))
    assert out["batch_index"] == [3, 4, 5, 6, 7, 8]


def test_repeat_latent_batch_offsets_follow_the_span():
    (out,) = RepeatLatentBatch().repeat(lat(b=2, batch_index=[0, 4]), 2)
    assert out["batch_index"] == [0, 4, 5, 9]


def test_repeat_latent_batch_masks():
    single = torch.rand(1, 1, 64, 64)
    (out,) = RepeatLatentBatch().repeat(lat(noise_mask=single), 2)
    assert out["noise_mask"] is single  # one mask already covers every item
    many = torch.rand(2, 1, 64, 64)
    (out,) = RepeatLatentBatch().repeat(lat(noise_mask=many), 2)
    assert torch.equal(out["noise_mask"], torch.cat([many, many]))
    assert "batch_index" not in out


def test_set_latent_noise_mask_reshapes_to_b1hw():
    src = lat()
    mask = torch.rand(3, 64, 48)
    (out,) = SetLatentNoiseMask().set_mask(src, mask)
    assert out["noise_mask"].shape == (3, 1, 64, 48)
    assert torch.equal(out["noise_mask"][:, 0], mask)
    assert "noise_mask" not in src
    (out,) = SetLatentNoiseMask().set_mask(src, torch.rand(64, 64))
    assert out["noise_mask"].shape == (1, 1, 64, 64)
