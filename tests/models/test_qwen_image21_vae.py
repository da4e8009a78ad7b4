"""Qwen-Image 2.1's VAE from its published layout (Wan 2.2 names, one-frame 3-D kernels, RGBA, 64 channels at
1/16), detected by the newest ComfyUI's rule and loaded onto diffusers' AutoencoderKLQwenImage21: encode and decode
equal diffusers' own model on the same tiny random weights, with ComfyUI's conventions (RGB padded with an
opaque alpha, pixels -1..1, outputs clamped to 0..1)."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.detect import probe
from nodes.models.errors import ModelLoadError
from nodes.models.qwen_image21_demo import tiny_vae, vae_to_published


@pytest.fixture(scope="module")
def reference():
    torch.manual_seed(0)
    return tiny_vae(torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def vae_file(reference, tmp_path_factory):
    path = tmp_path_factory.mktemp("q21vae") / "qwen_image_2.1_vae_tiny.safetensors"
    save_file({k: v.contiguous() for k, v in vae_to_published(reference.state_dict()).items()}, str(path))
    return path


@pytest.fixture(scope="module")
def vae(vae_file):
    torch.set_num_threads(1)
    return loader.load_vae(make_ref("vae", "qwen_image21", [vae_file]))


def test_published_layout_is_detected_as_comfyui_detects_it(vae_file, reference, tmp_path) -> None:
    info = probe(vae_file)
    assert (info.arch, info.kind) == ("qwen_image21", "vae")
    # the same layout with Wan 2.2's three-frame head stays the Wan 2.2 VAE
    sd = vae_to_published(reference.state_dict())
    sd["decoder.head.2.weight"] = sd["decoder.head.2.weight"].repeat(1, 1, 3, 1, 1)
    wan22 = tmp_path / "wan22.safetensors"
    save_file({k: v.contiguous() for k, v in sd.items()}, str(wan22))
    assert probe(wan22).arch == "wan22_5b"


def test_config_is_read_from_the_shapes(vae) -> None:
    cfg = vae.module.config
    assert (cfg.base_dim, cfg.decoder_base_dim, cfg.z_dim, cfg.in_channels, cfg.out_channels) == (8, 12, 64, 4, 4)
    assert (vae.latent_channels, vae.downscale) == (64, 16)


def test_encode_equals_diffusers_with_an_opaque_alpha(vae, reference) -> None:
    torch.manual_seed(1)
    rgb = torch.rand(2, 64, 48, 3)
    ours = vae.encode(rgb)
    rgba = torch.cat([rgb, torch.ones(2, 64, 48, 1)], dim=-1).movedim(-1, 1) * 2 - 1
    with torch.no_grad():
        expected = reference.encode(rgba[:, :, None]).latent_dist.mode()[:, :, 0]
    assert ours.shape == (2, 64, 4, 3)
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=1e-5)
    # an RGBA image keeps its own alpha
    rgba_in = torch.cat([rgb, torch.zeros(2, 64, 48, 1)], dim=-1)
    assert not torch.allclose(vae.encode(rgba_in), ours, atol=1e-3)


def test_decode_equals_diffusers_and_gives_rgba(vae, reference) -> None:
    torch.manual_seed(2)
    latent = torch.randn(2, 64, 3, 2)
    image = vae.decode(latent)
    with torch.no_grad():
        x = reference.decode(latent[:, :, None]).sample[:, :, 0]
    assert image.shape == (2, 48, 32, 4)
    torch.testing.assert_close(image, ((x + 1) / 2).clamp(0, 1).movedim(1, -1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(vae.decode(latent[:, :, None]), image)  # a frame axis: its first frame


def test_a_file_missing_a_tensor_is_refused_by_name(reference, tmp_path) -> None:
    sd = vae_to_published(reference.state_dict())
    del sd["decoder.upsamples.1.upsamples.0.residual.2.weight"]
    path = tmp_path / "broken.safetensors"
    save_file({k: v.contiguous() for k, v in sd.items()}, str(path))
    with pytest.raises(ModelLoadError, match="Qwen-Image 2.1 VAE"):
        loader.load_vae(make_ref("vae", "qwen_image21", [path]))
