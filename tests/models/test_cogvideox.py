"""CogVideoX (nodes/models/cogvideox*.py) against the newest ComfyUI's CogVideoX code run on ComfyUI 0.10.0 with the
tiny files (scripts/record_comfyui_cogvideox.py): detection, latent scale and model sampling (zsnr sigmas and
timesteps), the transformer's raw output and V_PREDICTION_DDPM's denoised with VOID's 32 inpainting channels (an odd
frame count padded circularly; a batch at two timesteps), the inpainting channels built from a concat latent, and
the VAE's chunked encode and rolling decode (odd and even latent frame counts), CLIPLoader type cogvideox's
conditioning (226 tokens, a weighted prompt)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_cogvideox.json.xz")
DIT, VAE, T5 = list(FIXTURE["files"])
ATOL = 1e-5


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def close(ours: torch.Tensor, entry: dict, atol: float = ATOL) -> None:
    torch.testing.assert_close(ours.float(), tensor(entry), atol=atol, rtol=0)


def test_files_are_the_recorded_ones(demo_workspace):
    for rel, digest in FIXTURE["files"].items():
        assert hashlib.sha256((demo_workspace.models_dir / rel).read_bytes()).hexdigest() == digest, rel


@pytest.fixture(scope="module")
def model(demo_workspace):
    from nodes.loaders import make_ref
    from nodes.models.loader import load_diffusion_model

    torch.set_num_threads(1)
    return load_diffusion_model(make_ref("diffusion_model", "cogvideox", [demo_workspace.models_dir / DIT]))


def test_detection_config_and_sampling_are_comfyuis(demo_workspace, model):
    from nodes.arch import is_video
    from nodes.models.detect import probe
    from nodes.sampling.model_sampling import model_sampling_from_config

    assert probe(demo_workspace.models_dir / DIT).arch == "cogvideox"
    assert probe(demo_workspace.models_dir / VAE).arch == "cogvideox"
    assert is_video("cogvideox")
    for key, value in FIXTURE["config"].items():
        assert model.config[key] == value, key
    assert model.latent_format.scale_factor == FIXTURE["latent_scale"]
    ms = model_sampling_from_config(model.sampling)
    rec = FIXTURE["sampling"]
    assert len(ms.sigmas) == rec["count"]
    close(ms.sigmas[::111], rec["sigmas"])
    close(ms.timestep(torch.tensor([0.05, 1.0, 30.0, float(ms.sigmas[-1])])), rec["timesteps"])


@pytest.mark.parametrize("case", range(len(FIXTURE["forward"])))
def test_transformer_and_denoised_are_comfyuis(model, case):
    from nodes.sampling.model_sampling import model_sampling_from_config

    rec = FIXTURE["forward"][case]
    shape, seed = rec["x"], rec["seed"]
    x, context = seeded(seed, *shape), seeded(seed + 10, shape[0], 9, FIXTURE["config"]["text_embed_dim"])
    concat = seeded(seed + 20, shape[0], 32, *shape[2:])
    sigma = torch.tensor(rec["sigma"])
    ms = model_sampling_from_config(model.sampling)
    t = ms.timestep(sigma)
    close(t, rec["timestep"])
    with torch.no_grad():
        raw = model.apply(ms.calculate_input(sigma, x), t, {"context": context, "concat": concat})
    close(raw, rec["raw"])
    close(ms.calculate_denoised(sigma, raw, x), rec["denoised"])


def test_inpainting_channels_are_comfyuis(model):
    rec = FIXTURE["concat"]
    noise, image = seeded(5, *rec["noise"]), seeded(6, *rec["image"])
    close(model.concat_image(image, noise), rec["out"])
    assert torch.equal(model.concat_image(None, noise), torch.zeros(2, 32, *rec["noise"][2:]))


@pytest.fixture(scope="module")
def vae(demo_workspace):
    from nodes.loaders import make_ref
    from nodes.models.loader import load_vae

    return load_vae(make_ref("vae", "cogvideox", [demo_workspace.models_dir / VAE]))


def test_vae_encode_and_decode_are_comfyuis(vae):
    rec = FIXTURE["vae"]
    pixels = torch.rand(13, 16, 24, 3, generator=torch.Generator().manual_seed(8))
    close(vae.encode(pixels), rec["encode"])
    for n, entry in rec["decode"].items():
        decoded = vae.decode_raw(seeded(20 + int(n), 1, 16, int(n), 2, 3))
        close(((decoded + 1.0) / 2.0).clamp(0.0, 1.0), entry)


def test_text_encoder_is_comfyuis(demo_workspace):
    from nodes.loaders import make_ref
    from nodes.models.loader import load_text_encoder

    encoder = load_text_encoder(
        make_ref("text_encoder", "cogvideox", [demo_workspace.models_dir / T5], clip_type="cogvideox")
    )
    for rec in FIXTURE["text"]:
        tokens = encoder.tokenize(rec["prompt"])
        assert [[list(t) for t in w] for w in tokens["t5xxl"]] == rec["tokens"]
        cond, pooled = encoder.encode(tokens)
        assert pooled is None and cond.shape[1] == 226
        close(cond, rec["cond"])
