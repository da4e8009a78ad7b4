"""Sampling previews follow --preview-method: none sends nothing, latent2rgb an RGB image of the latent."""

from __future__ import annotations

import pytest
import torch

from nodes import previews


def test_none_gives_no_preview():
    previews.set_method("none")
    assert previews.preview(torch.randn(1, 4, 8, 8)) is None


def test_latent2rgb_gives_jpeg_triple_of_latent_size():
    previews.set_method("latent2rgb", 256)
    try:
        fmt, image, size = previews.preview(torch.randn(2, 16, 8, 12))
        assert (fmt, size, image.size, image.mode) == ("JPEG", 256, (12, 8), "RGB")
        assert image.getextrema()[0] == (0, 255)  # each channel is stretched to the full range
    finally:
        previews.set_method("none")


def test_unknown_method_is_refused():
    with pytest.raises(ValueError, match="preview-method"):
        previews.set_method("magic")
