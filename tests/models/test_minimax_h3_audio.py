"""MiniMax H3's audio VAE (nodes.models.minimax_h3_audio) and VAE Decode Audio (nodes.library.vae_audio): the
tiny file in ComfyUI's layout (weight norms folded, latent statistics as tensors) is detected, loads onto
diffusers 0.42's AutoencoderKLMiniMaxH3Audio and decodes as diffusers' MiniMax H3 pipeline decodes (its decoder
block: latents x std + mean, the stereo channels as a batch of two, then the weight-normalised decoder); the node
applies ComfyUI's loudness guard and sample rate and refuses other VAEs by name."""

from __future__ import annotations

import asyncio

import pytest
import torch
from safetensors.torch import save_file

from nodes.library.ltxv_av import AVLatent
from nodes.library.vae_audio import VAEDecodeAudio, loudness_guard
from nodes.loaders import VAELoader
from nodes.models import minimax_h3_audio as ma
from nodes.models.detect import probe
from nodes.models.errors import ModelLoadError
from nodes.models.minimax_h3_demo import FILES, tiny_audio_vae

NAME = "minimax_h3_audio_vae_test_tiny.safetensors"


@pytest.fixture(scope="module")
def reference():
    torch.set_num_threads(1)
    return tiny_audio_vae()


def diffusers_decode(model, latent: torch.Tensor) -> torch.Tensor:
    """diffusers' MiniMax H3 decoder block, per batch item: [1, 32, 2, T] -> [1, 2, T*800]."""
    mean = torch.tensor(model.config.latents_mean).view(1, -1, 1)
    std = torch.tensor(model.config.latents_std).view(1, -1, 1)
    out = []
    for item in latent:
        z = item.permute(1, 0, 2)  # [stereo, 32, T]: one mono decode per channel
        with torch.no_grad():
            out.append(model.decode(z * std + mean, return_dict=False)[0].permute(1, 0, 2))
    return torch.cat(out)


def test_file_layout_is_comfyuis(reference):
    sd = ma.to_published(reference)
    assert not any(k.endswith(("weight_g", "weight_v")) for k in sd), "weight norms must be folded"
    for key in ("latents_mean", "latents_std", "pre_block.attn.zero_k_bias", "decoder.conv_post.weight"):
        assert key in sd
    assert "decoder.conv_post.bias" not in sd  # BigVGAN's last convolution has no bias, as ComfyUI builds it


def test_detected_and_decodes_as_diffusers(tmp_path, reference):
    path = tmp_path / "minimax_h3_audio_vae_tiny.safetensors"
    save_file(ma.to_published(reference), str(path))
    info = probe(str(path))
    assert (info.arch, info.kind) == ("minimax_h3_audio", "vae")
    from safetensors.torch import load_file

    model = ma.load_audio_vae(load_file(str(path)), str(path))
    latent = torch.randn(2, 32, 2, 9, generator=torch.Generator().manual_seed(1))
    ours = ma.decode(model, latent)
    theirs = diffusers_decode(reference, latent)
    assert ours.shape == (2, 2, 9 * 800)
    assert ours.std() > 0
    assert torch.allclose(ours, theirs, atol=1e-5, rtol=0), (ours - theirs).abs().max()


def test_bad_files_and_latents_are_named(reference):
    sd = ma.to_published(reference)
    with pytest.raises(ModelLoadError, match="latents_std"):
        ma.load_audio_vae({k: v for k, v in sd.items() if k != "latents_std"}, "x.safetensors")
    with pytest.raises(ModelLoadError, match="the file lacks"):
        ma.load_audio_vae({k: v for k, v in sd.items() if k != "decoder.conv_post.weight"}, "x.safetensors")
    model = ma.load_audio_vae(sd)
    with pytest.raises(ValueError, match=r"\[batch, 32, stereo channels, frames\]"):
        ma.decode(model, torch.zeros(1, 16, 2, 4))


def test_loudness_guard_is_comfyuis():
    loud = torch.randn(2, 2, 100, generator=torch.Generator().manual_seed(0))
    loud[1] *= 0.01  # the quiet item stays as it is
    out = loudness_guard(loud)
    std = loud[0].std() * 5.0
    assert torch.allclose(out[0], loud[0] / std) and torch.equal(out[1], loud[1])


@pytest.fixture
def audio_vae(demo_workspace, reference):
    folder = demo_workspace.models_dir / "vae"
    save_file(ma.to_published(reference), str(folder / NAME))
    try:
        yield VAELoader().load_vae(NAME)[0]
    finally:
        (folder / NAME).unlink()


def test_vae_decode_audio_node(audio_vae, reference, demo_workspace):
    video = torch.zeros(1, 24, 2, 2, 4)
    audio = torch.randn(1, 32, 2, 6, generator=torch.Generator().manual_seed(2))
    (out,) = asyncio.run(VAEDecodeAudio().execute({"samples": AVLatent((video, audio))}, audio_vae))
    assert out["sample_rate"] == 32000
    expected = loudness_guard(diffusers_decode(reference, audio))
    assert out["waveform"].shape == (1, 2, 6 * 800)
    assert torch.allclose(out["waveform"], expected, atol=1e-5, rtol=0)
    (plain,) = asyncio.run(VAEDecodeAudio().execute({"samples": audio, "sample_rate": 16000}, audio_vae))
    assert plain["sample_rate"] == 16000 and torch.allclose(plain["waveform"], out["waveform"], atol=1e-6)


def test_vae_decode_audio_refuses_other_vaes_by_name(demo_workspace):
    video_vae = VAELoader().load_vae(FILES["vae"].removeprefix("vae/"))[0]
    with pytest.raises(ValueError, match="the minimax_h3 VAE"):
        asyncio.run(VAEDecodeAudio().execute({"samples": torch.zeros(1, 32, 2, 4)}, video_vae))


def test_image_vae_path_refuses_the_audio_vae_by_name(tmp_path, reference):
    from cluster.refs import ModelRef
    from nodes.models.loader import load_vae

    path = tmp_path / "minimax_h3_audio_vae_tiny.safetensors"
    save_file(ma.to_published(reference), str(path))
    ref = ModelRef(component="vae", arch="minimax_h3_audio", sources=(str(path),), digests=(), options=())
    with pytest.raises(ModelLoadError, match="decode its latents with VAE Decode Audio"):
        load_vae(ref)
