"""MiniMax H3 wired into the engine: the demo files are detected by probe, the loaders hand them to the MiniMax
H3 components, and one denoise evaluation through ComfyUI's flow model sampling (shift 12, timestep sigma x 1000)
is the transformer's packed evaluation (checked against diffusers in test_minimax_h3.py) with the silent audio
latent; the video VAE encodes and decodes through the VAE component as the model code does."""

from __future__ import annotations

import pytest
import torch

from nodes.arch import is_video, latent_format, sampling_config
from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models import minimax_h3 as mh
from nodes.models import minimax_h3_vae as mvae
from nodes.models.detect import probe
from nodes.models.minimax_h3_demo import FILES, TEXT_DIM, build_demo_minimax_h3
from nodes.models.minimax_h3_engine import silent_audio
from nodes.sampling.model_sampling import model_sampling_from_config


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("minimax") / "models"
    build_demo_minimax_h3(root)
    return root


def test_demo_files_are_detected(models):
    dit, vae = probe(models / FILES["transformer"]), probe(models / FILES["vae"])
    assert (dit.arch, dit.kind, dit.components) == ("minimax_h3", "diffusion_model", frozenset({"diffusion_model"}))
    assert (vae.arch, vae.kind, vae.components) == ("minimax_h3", "vae", frozenset({"vae"}))
    assert is_video("minimax_h3") and latent_format("minimax_h3").channels == 24


def test_silent_audio_has_the_clips_length():
    # 2 latent frames = 5 pixel frames = 5/24 s = 8 audio latents; 7 = 22 frames = 37 audio latents (rounded)
    assert silent_audio(2).shape == (1, 32, 2, 8) and silent_audio(7).shape == (1, 32, 2, 37)


def test_one_denoise_evaluation_is_the_packed_transformer(models):
    torch.set_num_threads(1)
    model = loader.load_diffusion_model(make_ref("diffusion_model", "minimax_h3", [models / FILES["transformer"]]))
    ms = model_sampling_from_config(sampling_config("minimax_h3"))
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 24, 2, 4, 6, generator=g)
    context = torch.randn(2, 5, TEXT_DIM, generator=g)
    sigma = torch.tensor([0.8])
    out = model.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), {"context": context})
    denoised = ms.calculate_denoised(sigma, out, x)
    for b in range(2):  # each batch member its own packed sequence, at the sampler's sigma
        v, _ = mh.apply(model.module, x[b : b + 1], silent_audio(2), context[b : b + 1], 0.8)
        torch.testing.assert_close(denoised[b : b + 1], x[b : b + 1] - 0.8 * v, atol=1e-5, rtol=1e-5)
    # the schedule is ComfyUI's shift-12 flow: sigma(t=0.5) = 12*0.5 / (1 + 11*0.5)
    assert float(ms.sigma(torch.tensor(500.0))) == pytest.approx(6.0 / 6.5, abs=1e-6)


def test_video_vae_component_encodes_and_decodes(models):
    torch.set_num_threads(1)
    vae = loader.load_vae(make_ref("vae", "minimax_h3", [models / FILES["vae"]]))
    g = torch.Generator().manual_seed(4)
    frames = torch.rand(5, 32, 32, 3, generator=g)
    latent = vae.encode(frames)
    torch.testing.assert_close(latent, mvae.encode(vae.module, frames))
    torch.testing.assert_close(vae.encode(frames[:1]), mvae.encode_image(vae.module, frames[:1]))
    decoded = vae.decode(torch.cat([latent, latent]))
    assert decoded.shape == (10, 32, 32, 3)
    torch.testing.assert_close(decoded[:5], mvae.decode(vae.module, latent))
    with pytest.raises(ValueError, match="multiples of 16"):
        vae.encode(torch.rand(1, 24, 32, 3))
