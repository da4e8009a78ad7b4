"""ImageScaleToTotalPixels with today's ComfyUI's resolution_steps (comfy_extras/nodes_post_processing.py since
0.10.0: sides rounded to multiples of it, the area megapixels x 1024 x 1024 unrounded), optional here: a prompt
without it (0.3.64's interface) keeps 0.3.64's sizes."""

from __future__ import annotations

import math

import pytest
import torch

from nodes.library.post_processing import ImageScaleToTotalPixels
from nodes.upscale import common_upscale


@pytest.mark.parametrize("steps", [1, 16, 64])
def test_sides_are_multiples_of_resolution_steps(steps):
    image = torch.rand(1, 100, 150, 3, generator=torch.Generator().manual_seed(0))
    (out,) = ImageScaleToTotalPixels().upscale(image, "lanczos", 0.05, steps)
    scale = math.sqrt(0.05 * 1024 * 1024 / (150 * 100))
    width, height = round(150 * scale / steps) * steps, round(100 * scale / steps) * steps
    assert out.shape == (1, height, width, 3)
    assert torch.equal(out, common_upscale(image.movedim(-1, 1), width, height, "lanczos", "disabled").movedim(1, -1))


def test_without_resolution_steps_the_size_is_0_3_64s():
    image = torch.rand(1, 128, 128, 3)
    (out,) = ImageScaleToTotalPixels().upscale(image, "area", 0.02)
    side = round(128 * math.sqrt(int(0.02 * 1024 * 1024) / 128**2))
    assert out.shape == (1, side, side, 3) and side % 16 != 0
    (stepped,) = ImageScaleToTotalPixels().upscale(image, "area", 0.02, 16)
    assert stepped.shape == (1, 144, 144, 3)


def test_bad_resolution_steps_are_refused_by_name():
    with pytest.raises(ValueError, match="resolution_steps"):
        ImageScaleToTotalPixels().upscale(torch.rand(1, 8, 8, 3), "area", 0.01, 0)
