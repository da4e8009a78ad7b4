"""The tiny Flux files: deterministic, loadable from the checkpoint and the separate files, VAE conventions."""

from __future__ import annotations

import hashlib

import pytest
import torch

from cluster.refs import ModelRef, file_digest
from nodes.models.errors import ModelLoadError
from nodes.models.flux import is_flux_state_dict, load_diffusion_model
from nodes.models.flux_demo import build_demo_flux
from nodes.models.flux_vae import load_vae
from nodes.models.safetensors_io import load_state_dict


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    paths = build_demo_flux(tmp_path_factory.mktemp("models"))
    return {p.parent.name + "/" + p.name: str(p) for p in paths}


def _ref(component: str, *sources: str) -> ModelRef:
    return ModelRef(component, "flux", sources, tuple(file_digest(s) for s in sources))


def _hashes(paths) -> list[str]:
    return [hashlib.sha256(open(p, "rb").read()).hexdigest() for p in paths]


def test_same_seed_gives_byte_identical_files(files, tmp_path):
    again = build_demo_flux(tmp_path / "a")
    assert [p.relative_to(tmp_path / "a").as_posix() for p in again] == sorted(files, key=list(files).index)
    assert _hashes(again) == _hashes(files.values())
    other = build_demo_flux(tmp_path / "b", seed=1)
    assert all(a != b for a, b in zip(_hashes(other), _hashes(files.values())))


def test_files_use_the_layouts_flux_users_have(files):
    ck = load_state_dict(files["checkpoints/flux-tiny.safetensors"])
    prefixes = {k.split(".")[0] + "." + k.split(".")[1] for k in ck}
    assert prefixes == {
        "model.diffusion_model",
        "vae.encoder",
        "vae.decoder",
        "text_encoders.clip_l",
        "text_encoders.t5xxl",
    }
    dm = load_state_dict(files["diffusion_models/flux-tiny.safetensors"])
    assert "double_blocks.0.img_attn.qkv.weight" in dm and is_flux_state_dict(dm)
    assert "encoder.down.0.block.0.conv1.weight" in load_state_dict(files["vae/flux-tiny-ae.safetensors"])
    assert "shared.weight" in load_state_dict(files["text_encoders/flux-tiny-t5.safetensors"])


def test_checkpoint_and_separate_transformer_agree(files):
    torch.set_num_threads(1)
    ck, single = files["checkpoints/flux-tiny.safetensors"], files["diffusion_models/flux-tiny.safetensors"]
    a = load_diffusion_model(_ref("diffusion_model", ck), load_state_dict(ck))
    b = load_diffusion_model(_ref("diffusion_model", single), load_state_dict(single))
    assert a.config["axes_dims_rope"] == (4, 4, 8)  # from the config folder the metadata names
    x, cond = torch.randn(1, 16, 8, 8), {"context": torch.randn(1, 4, 32), "pooled": torch.randn(1, 32)}
    assert torch.equal(a.apply(x, torch.tensor([0.6]), cond), b.apply(x, torch.tensor([0.6]), cond))


def test_vae_encode_decode_shapes_and_ranges(files):
    ck, ae = files["checkpoints/flux-tiny.safetensors"], files["vae/flux-tiny-ae.safetensors"]
    vae = load_vae(_ref("vae", ae), load_state_dict(ae))
    assert vae.latent_channels == 16 and vae.downscale == 8
    pixels = torch.rand(1, 64, 68, 3, generator=torch.Generator().manual_seed(0))
    latent = vae.encode(pixels)
    assert latent.shape == (1, 16, 8, 8)  # 68 is centre-cropped to 64
    image = vae.decode(latent)
    assert image.shape == (1, 64, 64, 3) and image.min() >= 0 and image.max() <= 1
    from_ck = load_vae(_ref("vae", ck), load_state_dict(ck))
    assert torch.equal(from_ck.encode(pixels), latent)


def test_truncated_file_is_a_clear_error(files, tmp_path):
    data = open(files["diffusion_models/flux-tiny.safetensors"], "rb").read()
    cut = tmp_path / "flux-cut.safetensors"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match="truncated"):
        load_diffusion_model(_ref("diffusion_model", str(cut)), load_state_dict(cut))
