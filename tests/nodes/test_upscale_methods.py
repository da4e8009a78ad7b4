"""Shared resize helpers: output shapes per method, bislerp on hand-computed cases, lanczos vs PIL, center crop."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from PIL import Image

from nodes.upscale import bislerp, center_crop, common_upscale, slerp

# Several tests compare results bit for bit.
pytestmark = pytest.mark.usefixtures("fixed_threads")

METHODS = ["nearest-exact", "bilinear", "area", "bicubic", "bislerp", "lanczos"]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("crop", ["disabled", "center"])
def test_common_upscale_gives_requested_size(method, crop):
    x = torch.rand(2, 3, 12, 20)
    out = common_upscale(x, 7, 9, method, crop)
    assert out.shape == (2, 3, 9, 7)
    assert out.dtype == x.dtype


@pytest.mark.parametrize("method", ["nearest-exact", "bilinear", "area", "bicubic", "bislerp"])
def test_constant_input_stays_constant(method):
    x = torch.full((1, 4, 5, 6), 0.25)
    out = common_upscale(x, 11, 3, method, "disabled")
    torch.testing.assert_close(out, torch.full((1, 4, 3, 11), 0.25))


def test_nearest_exact_doubles_pixels():
    x = torch.arange(4.0).reshape(1, 1, 2, 2)
    out = common_upscale(x, 4, 4, "nearest-exact", "disabled")
    expected = torch.tensor([[0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 3, 3], [2, 2, 3, 3]], dtype=torch.float32)
    assert torch.equal(out[0, 0], expected)


def test_area_downscale_averages_blocks():
    x = torch.arange(16.0).reshape(1, 1, 4, 4)
    out = common_upscale(x, 2, 2, "area", "disabled")
    assert torch.equal(out[0, 0], torch.tensor([[2.5, 4.5], [10.5, 12.5]]))


def test_bislerp_follows_the_great_circle_between_orthogonal_vectors():
    # Two pixels, channel vectors (1,0) and (0,1); widening 2 -> 4 samples at source x = 0, 0.25, 0.75, 1.
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0]]).T.reshape(1, 2, 1, 2)
    out = bislerp(x, 4, 1)[0, :, 0, :].T
    angles = [0.0, math.pi / 8, 3 * math.pi / 8, math.pi / 2]
    expected = torch.tensor([[math.cos(a), math.sin(a)] for a in angles])
    torch.testing.assert_close(out, expected)


def test_bislerp_interpolates_length_linearly():
    # (2,0) and (0,4) at t = 0.25: direction at 22.5 degrees, length 0.75*2 + 0.25*4 = 2.5.
    x = torch.tensor([[2.0, 0.0], [0.0, 4.0]]).T.reshape(1, 2, 1, 2)
    v = bislerp(x, 4, 1)[0, :, 0, 1]
    torch.testing.assert_close(v, 2.5 * torch.tensor([math.cos(math.pi / 8), math.sin(math.pi / 8)]))


def test_bislerp_resizes_height_too():
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0]]).T.reshape(1, 2, 2, 1)  # the two vectors stacked vertically
    out = bislerp(x, 1, 4)[0, :, :, 0].T
    torch.testing.assert_close(out[1], torch.tensor([math.cos(math.pi / 8), math.sin(math.pi / 8)]))


def test_slerp_opposite_vectors_fall_back_to_linear():
    a, b = torch.tensor([[1.0, 0.0]]), torch.tensor([[-3.0, 0.0]])
    torch.testing.assert_close(slerp(a, b, torch.tensor([[0.25]])), torch.tensor([[0.0, 0.0]]))


def test_slerp_parallel_vectors_return_the_first():
    a, b = torch.tensor([[1.0, 1.0]]), torch.tensor([[2.0, 2.0]])
    assert torch.equal(slerp(a, b, torch.tensor([[0.5]])), a)


def test_slerp_zero_vector_has_no_direction():
    a, b = torch.tensor([[0.0, 0.0]]), torch.tensor([[0.0, 2.0]])
    out = slerp(a, b, torch.tensor([[0.5]]))
    # Only b's direction remains, scaled by sin(t*pi/2) and the blended length t*2.
    torch.testing.assert_close(out, torch.tensor([[0.0, math.sin(math.pi / 4) * 1.0]]))
    assert torch.isfinite(out).all()


def test_bislerp_keeps_dtype():
    x = torch.randn(1, 4, 3, 3, dtype=torch.float16)
    assert bislerp(x, 6, 6).dtype == torch.float16


def test_lanczos_matches_pil_rgb_resize():
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(9, 13, 3), dtype=np.uint8)
    x = torch.from_numpy(pixels.astype(np.float32) / 255.0).movedim(-1, 0)[None]
    out = common_upscale(x, 20, 7, "lanczos", "disabled")
    ref = np.asarray(Image.fromarray(pixels).resize((20, 7), resample=Image.Resampling.LANCZOS), dtype=np.float32)
    torch.testing.assert_close(out[0].movedim(0, -1), torch.from_numpy(ref / 255.0), rtol=0, atol=0)


def test_center_crop_trims_the_longer_side_equally():
    x = torch.arange(10.0).reshape(1, 1, 1, 10).expand(1, 1, 5, 10)
    out = center_crop(x, 5, 5)  # 10x5 -> square: drop 2.5 -> round(2.5)=2 columns each side
    assert out.shape[-2:] == (5, 6)
    assert out[0, 0, 0, 0].item() == 2.0
    tall = torch.zeros(1, 1, 12, 4)
    assert center_crop(tall, 4, 4).shape[-2:] == (4, 4)
    assert center_crop(tall, 1, 3).shape[-2:] == (12, 4)  # same aspect: untouched


def test_common_upscale_center_crop_then_resize():
    x = torch.zeros(1, 1, 4, 8)
    x[..., 2:6] = 1.0  # the center square is all ones
    out = common_upscale(x, 2, 2, "area", "center")
    assert torch.equal(out, torch.ones(1, 1, 2, 2))


def test_five_dim_input_is_resized_frame_by_frame():
    x = torch.randn(2, 4, 3, 6, 8)  # [N,C,T,H,W]
    out = common_upscale(x, 5, 4, "bislerp", "disabled")
    assert out.shape == (2, 4, 3, 4, 5)
    for t in range(3):
        assert torch.equal(out[:, :, t], common_upscale(x[:, :, t], 5, 4, "bislerp", "disabled"))


def test_unknown_method_is_refused():
    with pytest.raises(ValueError):
        common_upscale(torch.zeros(1, 1, 2, 2), 4, 4, "magic", "disabled")
