"""Krea 2: detection of the published layout, loading on diffusers' Krea2Transformer2DModel, and one denoising
step (DiffusionModel.apply, ComfyUI's [B,16,H,W] latent and sigma) equal to diffusers' own forward on the same
tiny weights, packed and positioned as diffusers' Krea2Pipeline does. No ComfyUI runnable here has Krea 2, so
the reference is diffusers, not ComfyUI."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from diffusers import Krea2Pipeline
from safetensors.torch import load_file, save_file

from nodes.arch import latent_format, sampling_config
from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.components import WAN21_LATENT
from nodes.models.detect import probe
from nodes.models.errors import ModelLoadError
from nodes.models.krea2_demo import CONFIG, build_demo_krea2, tiny_transformer


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("krea2")
    path, *_ = build_demo_krea2(root)
    prefixed = root / "krea2_prefixed.safetensors"
    save_file({f"model.diffusion_model.{k}": v for k, v in load_file(path).items()}, str(prefixed))
    return {"bare": path, "prefixed": prefixed, "root": root}


@pytest.fixture(scope="module")
def model(files):
    return loader.load_diffusion_model(make_ref("diffusion_model", "krea2", [files["bare"]]))


def test_published_layout_is_detected(files):
    names = load_file(files["bare"]).keys()
    assert {
        "first.weight",
        "txtfusion.projector.weight",
        "blocks.0.attn.wq.weight",
        "blocks.0.mod.lin",
        "last.modulation.lin",
        "tproj.1.weight",
    } <= set(names)
    for key in ("bare", "prefixed"):
        info = probe(files[key])
        assert (info.arch, info.kind, info.layout) == ("krea2", "diffusion_model", "krea")
    assert probe(files["prefixed"]).prefix == "model.diffusion_model."


def test_config_from_shapes(model):
    assert model.arch == "krea2"
    assert {k: model.config[k] for k in CONFIG} == CONFIG
    assert model.latent_format is WAN21_LATENT is latent_format("krea2")
    assert model.sampling == sampling_config("krea2") == {"kind": "flux", "shift": 1.15}


def _reference_step(x: torch.Tensor, sigma: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
    """diffusers' pipeline path: pack 2x2, its position ids, its transformer, unpack."""
    ref = tiny_transformer()
    pipe = Krea2Pipeline.__new__(Krea2Pipeline)
    pipe.patch_size, pipe.vae_scale_factor = 2, 8
    b, c, h, w = x.shape
    packed = pipe._pack_latents(x, b, c, h, w)
    pos = Krea2Pipeline.prepare_position_ids(context.shape[1], h // 2, w // 2, x.device)
    with torch.no_grad():
        out = ref(
            hidden_states=packed, encoder_hidden_states=context, timestep=sigma, position_ids=pos, return_dict=False
        )[0]
    return pipe._unpack_latents(out, h * 8, w * 8)[:, :, 0]


@pytest.mark.parametrize("batch", [1, 2])
def test_one_step_equals_diffusers(model, batch):
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, 16, 6, 8, generator=gen)
    sigma = torch.tensor([0.7, 0.3][:batch])
    context = torch.randn(batch, 5, 3, 32, generator=gen)
    expected = _reference_step(x, sigma, context)
    with torch.no_grad():
        got = model.apply(x, sigma, {"context": context})
        flat = model.apply(x, sigma, {"context": context.flatten(2)})
    assert got.shape == x.shape
    assert torch.allclose(got, expected, atol=1e-5, rtol=0), (got - expected).abs().max()
    assert torch.equal(flat, got)
    with torch.no_grad():  # a 5-D one-frame latent comes back 5-D
        assert torch.equal(model.apply(x[:, :, None], sigma, {"context": context})[:, :, 0], got)


def test_odd_latent_is_padded_and_cropped(model):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(1, 16, 5, 7, generator=gen)
    context = torch.randn(1, 4, 3, 32, generator=gen)
    with torch.no_grad():
        out = model.apply(x, torch.tensor([0.5]), {"context": context})
    assert out.shape == x.shape and torch.isfinite(out).all()


def test_wrong_context_is_refused_by_name(model):
    with pytest.raises(ValueError, match="3 stacked text layers of width 32.*krea2"):
        model.apply(torch.zeros(1, 16, 4, 4), torch.tensor([0.5]), {"context": torch.zeros(1, 5, 64)})


def test_truncated_file_is_refused(files, tmp_path):
    sd = load_file(files["bare"])
    del sd["blocks.1.mlp.down.weight"]
    bad = tmp_path / "krea2_broken.safetensors"
    save_file(sd, str(bad))
    with pytest.raises(ModelLoadError, match="Krea 2 transformer.*missing"):
        loader.load_diffusion_model(make_ref("diffusion_model", "krea2", [bad]))


def test_demo_file_is_byte_identical_on_rebuild(files, tmp_path):
    for again in build_demo_krea2(tmp_path):
        assert again.read_bytes() == (files["root"] / again.relative_to(tmp_path)).read_bytes()


def test_scaled_fp8_file_is_multiplied_out(files, tmp_path):
    """krea2_turbo_fp8_scaled's layout (ComfyUI's scaled fp8: float8 weights, a float32 scale_weight beside each,
    the scaled_fp8 marker): the model holds weight x scale."""
    sd = load_file(files["bare"])
    scaled, expected = {"scaled_fp8": torch.zeros(2, dtype=torch.float8_e4m3fn)}, {}
    for key, value in sd.items():
        if key.endswith(".weight") and value.dim() == 2:
            scale = value.abs().max() / 448
            q = (value / scale).to(torch.float8_e4m3fn)
            scaled[key], scaled[key[: -len("weight")] + "scale_weight"] = q, scale.reshape(1)
            expected[key] = q.float() * scale
        else:
            scaled[key] = value
    path = tmp_path / "krea2_turbo_fp8_scaled_tiny.safetensors"
    save_file(scaled, str(path))
    assert probe(path).arch == "krea2"
    model = loader.load_diffusion_model(make_ref("diffusion_model", "krea2", [path]))
    assert torch.equal(model.module.img_in.weight, expected["first.weight"])
    assert torch.equal(model.module.transformer_blocks[1].attn.to_gate.weight, expected["blocks.1.attn.gate.weight"])


@pytest.mark.parametrize("naming", ["krea", "diffusers"])
def test_lora_is_merged(files, tmp_path, naming):
    """A style LoRA (LoraLoaderModelOnly) in ai-toolkit's Krea names (`diffusion_model.blocks.N.attn.wq`) or
    diffusers' (`transformer.transformer_blocks.N.attn.to_q`): W + strength * alpha/rank * B @ A."""
    from cluster.refs import Patch
    from nodes.loaders import file_digest

    sd = load_file(files["bare"])
    gen = torch.Generator().manual_seed(5)
    layers = {
        "blocks.0.attn.wq": "transformer_blocks.0.attn.to_q",
        "txtfusion.refiner_blocks.1.mlp.up": "text_fusion.refiner_blocks.1.ff.up",
        "first": "img_in",
    }
    lora, expected = {}, {}
    for krea, theirs in layers.items():
        w = sd[krea + ".weight"]
        a, b = torch.randn(4, w.shape[1], generator=gen), torch.randn(w.shape[0], 4, generator=gen)
        name = f"diffusion_model.{krea}" if naming == "krea" else f"transformer.{theirs}"
        lora |= {f"{name}.lora_A.weight": a, f"{name}.lora_B.weight": b, f"{name}.alpha": torch.tensor(2.0)}
        expected[theirs] = w + 0.8 * (2.0 / 4) * (b @ a)
    path = tmp_path / f"krea2_style_{naming}.safetensors"
    save_file(lora, str(path))
    ref = make_ref("diffusion_model", "krea2", [files["bare"]]).with_patch(Patch(str(path), file_digest(path), 0.8))
    module = loader.load_diffusion_model(ref).module
    got = module.state_dict()
    for theirs, want in expected.items():
        torch.testing.assert_close(got[theirs + ".weight"], want, rtol=0, atol=1e-6)
    assert torch.equal(got["transformer_blocks.0.attn.to_k.weight"], sd["blocks.0.attn.wk.weight"])


def test_lora_for_another_model_is_refused(files, tmp_path):
    from cluster.refs import Patch
    from nodes.loaders import file_digest

    path = tmp_path / "not_krea.safetensors"
    save_file(
        {
            "diffusion_model.double_blocks.0.img_attn.qkv.lora_A.weight": torch.zeros(4, 32),
            "diffusion_model.double_blocks.0.img_attn.qkv.lora_B.weight": torch.zeros(96, 4),
        },
        str(path),
    )
    ref = make_ref("diffusion_model", "krea2", [files["bare"]]).with_patch(Patch(str(path), file_digest(path), 1.0))
    with pytest.raises(ModelLoadError, match="another architecture"):
        loader.load_diffusion_model(ref)


def test_demo_lora_is_merged_as_released(files):
    """The demo's style-reference LoRA (ai-toolkit's `diffusion_model.` + Krea names, lora_A/lora_B, no alpha: scale
    1) merges into every block's attention and MLP projections: W + strength * B @ A."""
    from cluster.refs import Patch
    from nodes.loaders import file_digest
    from nodes.models.krea2_demo import LORA_FILE, LORA_LAYERS

    path = files["root"] / LORA_FILE
    lora, sd = load_file(path), load_file(files["bare"])
    assert len(lora) == 2 * len(LORA_LAYERS) * CONFIG["num_layers"]
    ref = make_ref("diffusion_model", "krea2", [files["bare"]]).with_patch(Patch(str(path), file_digest(path), 0.5))
    got = loader.load_diffusion_model(ref).module.state_dict()
    a, b = (
        lora["diffusion_model.blocks.1.mlp.down.lora_A.weight"],
        lora["diffusion_model.blocks.1.mlp.down.lora_B.weight"],
    )
    want = sd["blocks.1.mlp.down.weight"] + 0.5 * (b @ a)
    torch.testing.assert_close(got["transformer_blocks.1.ff.down.weight"], want, rtol=0, atol=1e-6)
    a, b = (
        lora["diffusion_model.blocks.0.attn.gate.lora_A.weight"],
        lora["diffusion_model.blocks.0.attn.gate.lora_B.weight"],
    )
    want = sd["blocks.0.attn.gate.weight"] + 0.5 * (b @ a)
    torch.testing.assert_close(got["transformer_blocks.0.attn.to_gate.weight"], want, rtol=0, atol=1e-6)
