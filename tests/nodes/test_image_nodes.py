"""Image nodes: scale, invert, batch, blank images, rebatching, outpaint padding."""

from __future__ import annotations

import pytest
import torch

from nodes.image import (
    EmptyImage,
    ImageBatch,
    ImageInvert,
    ImagePadForOutpaint,
    ImageScale,
    ImageScaleBy,
    RebatchImages,
)

# Several tests compare results bit for bit.
pytestmark = pytest.mark.usefixtures("fixed_threads")


def test_image_scale_to_size():
    img = torch.rand(2, 10, 20, 3)
    (out,) = ImageScale().upscale(img, "bilinear", 30, 12, "disabled")
    assert out.shape == (2, 12, 30, 3)


@pytest.mark.parametrize("method", ["nearest-exact", "bilinear", "area", "bicubic", "lanczos"])
def test_image_scale_every_method(method):
    (out,) = ImageScale().upscale(torch.rand(1, 8, 8, 3), method, 16, 4, "center")
    assert out.shape == (1, 4, 16, 3)


def test_image_scale_zero_side_keeps_aspect():
    img = torch.rand(1, 10, 20, 3)
    assert ImageScale().upscale(img, "area", 0, 5, "disabled")[0].shape == (1, 5, 10, 3)
    assert ImageScale().upscale(img, "area", 7, 0, "disabled")[0].shape == (1, 4, 7, 3)  # round(3.5) = 4
    assert ImageScale().upscale(img, "area", 0, 0, "disabled")[0] is img


def test_image_scale_keeps_channels_last_layout():
    img = torch.zeros(1, 4, 4, 3)
    img[..., 0] = 1.0  # pure red
    (out,) = ImageScale().upscale(img, "nearest-exact", 8, 8, "disabled")
    assert torch.equal(out[..., 0], torch.ones(1, 8, 8)) and not out[..., 1:].any()


def test_image_scale_by():
    (out,) = ImageScaleBy().upscale(torch.rand(1, 10, 20, 3), "bicubic", 1.25)
    assert out.shape == (1, 12, 25, 3)  # round(12.5) = 12 (banker's), round(25) = 25


def test_image_invert():
    img = torch.rand(1, 4, 4, 3)
    assert torch.equal(ImageInvert().invert(img)[0], 1.0 - img)


def test_image_batch_same_size_concatenates():
    a, b = torch.rand(2, 8, 8, 3), torch.rand(1, 8, 8, 3)
    (out,) = ImageBatch().batch(a, b)
    assert torch.equal(out, torch.cat([a, b]))


def test_image_batch_resizes_second_to_first():
    a, b = torch.rand(1, 8, 8, 3), torch.ones(1, 4, 16, 3)
    (out,) = ImageBatch().batch(a, b)
    assert out.shape == (2, 8, 8, 3)
    torch.testing.assert_close(out[1], torch.ones(8, 8, 3))


def test_empty_image_colour():
    (out,) = EmptyImage().generate(5, 3, 2, 0xFF8000)
    assert out.shape == (2, 3, 5, 3)
    torch.testing.assert_close(out[1, 2, 4], torch.tensor([1.0, 128 / 255, 0.0]))
    assert torch.equal(EmptyImage().generate(2, 2, 1, 0)[0], torch.zeros(1, 2, 2, 3))


def test_rebatch_images_regroups_a_list():
    imgs = [torch.full((3, 4, 4, 3), 0.0), torch.full((2, 4, 4, 3), 1.0)]
    (out,) = RebatchImages().rebatch(imgs, [2])
    assert [o.shape[0] for o in out] == [2, 2, 1]
    assert torch.equal(torch.cat(out), torch.cat(imgs))


def test_pad_for_outpaint_grey_border_and_mask():
    img = torch.rand(1, 4, 6, 3)
    out, mask = ImagePadForOutpaint().expand_image(img, 8, 0, 0, 2, 0)
    assert out.shape == (1, 6, 14, 3) and mask.shape == (1, 6, 14)
    assert torch.equal(out[:, 0:4, 8:14], img)
    assert (out[:, :, :8] == 0.5).all() and (out[:, 4:] == 0.5).all()
    assert (mask[:, 0:4, 8:14] == 0).all()
    assert (mask[:, :, :8] == 1).all() and (mask[:, 4:] == 1).all()


def test_pad_for_outpaint_feathers_only_padded_sides():
    img = torch.rand(1, 20, 20, 3)
    _, mask = ImagePadForOutpaint().expand_image(img, 8, 0, 0, 0, 4)
    inner = mask[0, :, 8:]
    # Column j of the original is j pixels from the padded left edge: ((4 - j) / 4)^2 for j < 4.
    expected_cols = torch.tensor([1.0, 0.5625, 0.25, 0.0625] + [0.0] * 16)
    assert torch.equal(inner, expected_cols.expand(20, 20))


def test_pad_for_outpaint_skips_feathering_wider_than_half_the_image():
    _, mask = ImagePadForOutpaint().expand_image(torch.rand(1, 6, 6, 3), 8, 8, 8, 8, 3)
    assert (mask[0, 8:14, 8:14] == 0).all()
