"""Demo files are reproducible; the loader shares one read per checkpoint; other source layouts agree."""

from __future__ import annotations

import hashlib
import json
import shutil

import torch
from safetensors.torch import save_file

from nodes.models import safetensors_io
from nodes.models.demo import build_demo_models
from nodes.models.loader import CONFIGS, load_diffusion_model, load_text_encoder, load_vae, probe

SD1 = "checkpoints/sd1-tiny.safetensors"


def _digest(p) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_demo_build_is_byte_identical_and_small(sd_models, tmp_path):
    again = build_demo_models(tmp_path, include_flux=False)
    assert len(again) == 10
    for f in again:
        assert _digest(f) == _digest(sd_models / f.relative_to(tmp_path))
    assert sum(f.stat().st_size for f in again) < 12 << 20  # 3.7 MB of it the SDXL refiner checkpoint


def test_one_checkpoint_is_read_once_for_all_components(make_ref):
    safetensors_io.CACHE.clear()
    before = safetensors_io.CACHE.reads
    load_diffusion_model(make_ref("diffusion_model", SD1))
    load_text_encoder(make_ref("text_encoder", SD1))
    load_vae(make_ref("vae", SD1))
    assert safetensors_io.CACHE.reads - before == 1


def test_bare_unet_file_equals_the_checkpoint(sd_models, tmp_path, make_ref):
    sd = safetensors_io.load_state_dict(sd_models / SD1)
    f = tmp_path / "unet.safetensors"
    save_file(
        {k[len("model.diffusion_model.") :]: v for k, v in sd.items() if k.startswith("model.diffusion_model.")}, str(f)
    )
    x, t, ctx = torch.randn(1, 4, 8, 8), torch.tensor([250.0]), torch.randn(1, 77, 32)
    a = load_diffusion_model(make_ref("diffusion_model", str(f))).apply(x, t, {"context": ctx})
    b = load_diffusion_model(make_ref("diffusion_model", SD1)).apply(x, t, {"context": ctx})
    assert torch.equal(a, b)


def test_diffusers_folder_equals_the_checkpoint(tmp_path, make_ref):
    unet = load_diffusion_model(make_ref("diffusion_model", SD1))
    te = load_text_encoder(make_ref("text_encoder", SD1))
    vae = load_vae(make_ref("vae", SD1))
    folder = tmp_path / "sd1-diffusers"
    unet.module.save_pretrained(folder / "unet")
    vae.module.save_pretrained(folder / "vae")
    te.sides["l"].module.save_pretrained(folder / "text_encoder")
    te.sides["l"].tokenizer.bpe._tok.save_pretrained(folder / "tokenizer")
    shutil.copytree(CONFIGS / "sd1" / "scheduler", folder / "scheduler")
    (folder / "model_index.json").write_text(json.dumps({"_class_name": "StableDiffusionPipeline"}))
    info = probe(folder)
    assert (info.arch, info.kind) == ("sd1", "diffusers")
    f_unet = load_diffusion_model(make_ref("diffusion_model", str(folder)))
    f_te = load_text_encoder(make_ref("text_encoder", str(folder)))
    f_vae = load_vae(make_ref("vae", str(folder)))
    tokens = te.tokenize("a lighthouse")
    assert f_te.tokenize("a lighthouse") == tokens
    assert torch.equal(f_te.encode(tokens)[0], te.encode(tokens)[0])
    x, t, ctx = torch.randn(1, 4, 8, 8), torch.tensor([250.0]), torch.randn(1, 77, 32)
    assert torch.equal(f_unet.apply(x, t, {"context": ctx}), unet.apply(x, t, {"context": ctx}))
    assert torch.equal(f_vae.decode(x), vae.decode(x))
    assert f_unet.sampling == unet.sampling
