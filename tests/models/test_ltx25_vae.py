"""LTX-2.5's video VAE file (nodes/models/ltx25_vae.py, tiny file from nodes/models/ltx25_demo.py): recognised as
ComfyUI recognises it (`decoder.conv_in_x_t.weight`), encoded with LTX-2's encoder means and the file's statistics,
decoded by the diffusion decoder (tests/models/test_ltx25_decoder.py checks that network against ComfyUI's) after
un-normalising, reproducibly (ComfyUI seeds the decoder's noise with 0 on every decode)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.detect import probe
from nodes.models.errors import ModelLoadError
from nodes.models.ltx25_demo import CONFIG, VAE_FILE, build_demo_ltx25
from nodes.models.ltx25_vae import LTX25VideoVAE

pytest.importorskip("comfy_kitchen")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build_demo_ltx25(tmp_path_factory.mktemp("ltx25"))[0]


def load(path: Path) -> LTX25VideoVAE:
    return loader.load_vae(make_ref("vae", "ltx2", [path]))


def test_the_file_is_an_ltx2_vae_with_the_diffusion_decoder(tiny: Path) -> None:
    info = probe(tiny)
    assert (info.arch, info.kind, info.prefix) == ("ltx2", "vae", "")
    assert tiny.as_posix().endswith(VAE_FILE)
    vae = load(tiny)
    assert isinstance(vae, LTX25VideoVAE) and vae.latent_channels == 128


def test_encode_normalises_the_encoders_means(tiny: Path) -> None:
    torch.set_num_threads(1)
    vae = load(tiny)
    pixels = torch.rand(1, 70, 64, 3, generator=torch.Generator().manual_seed(0))
    z = vae.encode(pixels)
    assert z.shape == (1, 128, 1, 2, 2)
    x = pixels[:, 3:67].movedim(-1, 0)[None] * 2 - 1  # cropped to 64 rows at the centre, as ComfyUI crops
    with torch.no_grad():
        raw = vae.module.encoder(x)
    # the means and the one log-variance channel the file's "constant" config declares
    assert vae.module.encoder.conv_out.conv.weight.shape[0] == 129
    mean, std = vae.module.latents_mean.view(1, -1, 1, 1, 1), vae.module.latents_std.view(1, -1, 1, 1, 1)
    torch.testing.assert_close(z, (raw[:, :128] - mean) / std, rtol=0, atol=0)
    with pytest.raises(ValueError, match="1 \\+ 8k frames"):
        vae.encode(torch.rand(2, 64, 64, 3))


def test_decode_unnormalises_and_is_reproducible(tiny: Path) -> None:
    torch.set_num_threads(1)
    vae = load(tiny)
    z = torch.randn(1, 128, 1, 2, 2, generator=torch.Generator().manual_seed(1))
    raw = vae.decode_raw(z)
    assert raw.shape == (1, 3, 1, 64, 64)
    with torch.no_grad():
        mean, std = vae.module.latents_mean.view(1, -1, 1, 1, 1), vae.module.latents_std.view(1, -1, 1, 1, 1)
        direct = vae.module.decoder(z * std + mean)
    torch.testing.assert_close(raw, direct, rtol=0, atol=0)
    torch.testing.assert_close(vae.decode_raw(z), raw, rtol=0, atol=0)  # the noise is seeded on every decode
    image = vae.decode(z)
    assert image.shape == (1, 64, 64, 3) and 0 <= float(image.min()) and float(image.max()) <= 1
    assert vae.decoded_size(0, 3) == 17 and vae.decoded_size(1, 2) == 64


def test_unusable_files_are_refused_by_name(tiny: Path, tmp_path: Path) -> None:
    sd = load_file(tiny)
    config = json.loads(json.dumps(CONFIG))
    config["vae"]["decoder"]["default_num_inference_steps"] = 2
    multi = tmp_path / "multi.safetensors"
    save_file(sd, multi, metadata={"config": json.dumps(config)})
    with pytest.raises(ModelLoadError, match="single-step"):
        load(multi)
    del sd["decoder.conv_out.weight"]
    broken = tmp_path / "broken.safetensors"
    save_file(sd, broken, metadata={"config": json.dumps(CONFIG)})
    with pytest.raises(ModelLoadError, match="decoder.conv_out.weight"):
        load(broken)
