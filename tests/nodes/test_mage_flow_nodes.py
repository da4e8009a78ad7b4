"""TextEncodeMageFlowEdit as the newest ComfyUI source declares and computes it (comfy_extras/nodes_mage.py): the
output size (width/height, each 0 side from the first image, 1024 without one, floored to 16s), the vision tower's
copy of each picture (long edge at most 384, bicubic), the reference latents (the VAE's encode of each picture
bicubic-resized to the output size) on both conditionings, the empty negative read as a space, and the empty
128-channel latent. The encoder's and VAE's numbers are checked against ComfyUI in tests/models/test_mage_flow.py."""

from __future__ import annotations

import asyncio

import pytest
import torch

from nodes.library.mage_flow import TextEncodeMageFlowEdit, output_size, vision_copy
from nodes.loaders import CLIPLoader, VAELoader
from nodes.models import loader
from nodes.upscale import common_upscale

CLIP = "qwen3vl_8b_tiny.safetensors"
VAE = "mage_flow_vae_tiny.safetensors"


@pytest.mark.parametrize(
    "width,height,image,expected",
    [
        (0, 0, None, (1024, 1024)),
        (0, 0, (100, 70), (64, 96)),  # (h, w) of the first image: its own size floored to 16s
        (0, 512, (100, 70), (64, 512)),  # each side falls back on its own
        (20, 8, None, (16, 16)),  # at least 16
        (200, 136, (33, 33), (192, 128)),
    ],
)
def test_output_size(width, height, image, expected):
    first = None if image is None else torch.zeros(1, *image, 3)
    assert output_size(width, height, first) == expected


def test_vision_copy_caps_the_long_edge_at_384():
    small = torch.rand(1, 300, 200, 3)
    assert vision_copy(small) is small
    tall = torch.rand(1, 500, 333, 3)
    out = vision_copy(tall)
    scale = 384 / 500
    assert out.shape == (1, 384, round(333 * scale), 3)
    assert torch.equal(
        out, common_upscale(tall.movedim(-1, 1), round(333 * scale), 384, "bicubic", "disabled").movedim(1, -1)
    )


@pytest.fixture(scope="module")
def clip(demo_workspace):
    (ref,) = CLIPLoader().load_clip(CLIP, "mage")
    return ref


@pytest.fixture(scope="module")
def vae(demo_workspace):
    (ref,) = VAELoader().load_vae(VAE)
    return ref


def test_text_to_image_gives_both_conditionings_and_the_latent(clip, demo_workspace):
    encoder = loader.load_text_encoder(clip)
    positive, negative, latent = asyncio.run(
        TextEncodeMageFlowEdit().execute(clip, "a fox", "", None, width=256, height=160, batch_size=2)
    )
    assert latent["samples"].shape == (2, 128, 10, 16) and not latent["samples"].any()
    assert torch.equal(positive[0][0], encoder.encode(encoder.tokenize("a fox"))[0])
    assert torch.equal(negative[0][0], encoder.encode(encoder.tokenize(" "))[0])  # empty reads as a space
    assert "reference_latents" not in positive[0][1]


def test_edit_reads_the_pictures_and_adds_reference_latents(clip, vae, demo_workspace):
    encoder, codec = loader.load_text_encoder(clip), loader.load_vae(vae)
    gen = torch.Generator().manual_seed(3)
    first, second = torch.rand(1, 520, 400, 3, generator=gen), torch.rand(1, 64, 96, 3, generator=gen)
    kwargs = {"images.image_2": second, "images.image_1": first}  # name order, not the order given
    positive, negative, latent = asyncio.run(
        TextEncodeMageFlowEdit().execute(clip, "make it blue", "blurry", vae, **kwargs)
    )
    assert latent["samples"].shape == (1, 128, 520 // 16, 400 // 16)  # the first image's size, floored to 16s
    seen = [vision_copy(first), second]
    assert seen[0].shape[1] == 384
    expected = encoder.encode(encoder.tokenize("make it blue", images=2), seen)[0]
    assert torch.equal(positive[0][0], expected)
    assert torch.equal(negative[0][0], encoder.encode(encoder.tokenize("blurry", images=2), seen)[0])
    resized = [
        common_upscale(im.movedim(-1, 1), 400, 512, "bicubic", "disabled").movedim(1, -1) for im in (first, second)
    ]
    refs = positive[0][1]["reference_latents"]
    assert len(refs) == 2 and negative[0][1]["reference_latents"] == refs
    for ref, image in zip(refs, resized, strict=True):
        assert torch.allclose(ref, codec.encode(image), atol=1e-6)


def test_bad_input_is_refused_by_name(clip):
    with pytest.raises(ValueError, match="width"):
        asyncio.run(TextEncodeMageFlowEdit().execute(clip, "x", "", None, width=-16))
    with pytest.raises(ValueError, match="images.image_1"):
        asyncio.run(TextEncodeMageFlowEdit().execute(clip, "x", "", None, **{"images.image_1": "not an image"}))
    (qwen,) = CLIPLoader().load_clip(CLIP, "qwen_image")
    with pytest.raises(ValueError, match="type mage"):
        asyncio.run(TextEncodeMageFlowEdit().execute(qwen, "x"))
