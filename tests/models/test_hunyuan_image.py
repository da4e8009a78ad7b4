"""Hunyuan Image 2.1 against ComfyUI 0.3.64 run on the same tiny files (scripts/record_comfyui_hunyuan_image.py ->
fixtures/comfyui_hunyuan_image.json.xz): detection of the published layouts, the transformer's raw output, the
denoised prediction with the latent format and model sampling, the 32x VAE's decode and encode, the
HunyuanRefinerLatent node, and CLIPLoader type hunyuan_image's tokens and conditioning."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from nodes.arch import latent_format, sampling_config
from nodes.library.family_latents import HunyuanRefinerLatent
from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.detect import probe
from nodes.models.errors import ModelLoadError
from nodes.models.hunyuan_image_demo import FILES, build_demo_hunyuan_image
from nodes.sampling.model_sampling import model_sampling_from_config
from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_hunyuan_image.json")
TOL = 1e-5


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hunyuan_image")
    build_demo_hunyuan_image(root)
    return {name: root / rel for name, rel in FILES.items()}


@pytest.fixture(scope="module")
def model(files):
    torch.set_num_threads(2)
    return loader.load_diffusion_model(make_ref("diffusion_model", "hunyuan_image", [files["transformer"]]))


@pytest.fixture(scope="module")
def vae(files):
    return loader.load_vae(make_ref("vae", "hunyuan_image", [files["vae"]]))


def draws(seed: int, *shapes: list[int]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g) for s in shapes]


def test_same_files_as_recorded(files):
    for name, path in files.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == FIXTURE["files"][name]["sha256"], name


def test_published_layouts_are_detected(files, tmp_path):
    names = set(load_file(files["transformer"]))
    assert {
        "double_blocks.0.img_attn_qkv.weight",
        "double_blocks.0.img_mod.linear.weight",
        "single_blocks.0.linear1.weight",
        "txt_in.individual_token_refiner.blocks.0.self_attn_qkv.weight",
        "final_layer.adaLN_modulation.1.weight",
        "byt5_in.fc1.weight",
    } <= names
    info = probe(files["transformer"])
    assert (info.arch, info.kind, info.layout) == ("hunyuan_image", "diffusion_model", "hunyuan")
    prefixed = tmp_path / "prefixed.safetensors"
    save_file({f"model.diffusion_model.{k}": v for k, v in load_file(files["transformer"]).items()}, str(prefixed))
    assert probe(prefixed).prefix == "model.diffusion_model."
    assert {
        "encoder.down.0.block.0.conv1.weight",
        "decoder.up.0.upsample.conv.weight",
        "encoder.mid.attn_1.q.weight",
    } <= set(load_file(files["vae"]))
    info = probe(files["vae"])
    assert (info.arch, info.kind) == ("hunyuan_image", "vae")


def test_other_hunyuan_video_family_files_are_refused_by_name(files, tmp_path):
    sd = load_file(files["transformer"])
    sd["img_in.proj.weight"] = sd["img_in.proj.weight"][:, :, None]  # a 3-D patch embedder: the refiner's layout
    path = tmp_path / "refiner.safetensors"
    save_file(sd, str(path))
    with pytest.raises(ModelLoadError, match="HunyuanVideo-family"):
        probe(path)


def test_config_from_shapes(model):
    unet = FIXTURE["unet_config"]
    assert model.arch == "hunyuan_image"
    assert model.config["num_attention_heads"] == unet["num_heads"]
    assert (
        model.config["num_layers"] == unet["depth"] and model.config["num_single_layers"] == unet["depth_single_blocks"]
    )
    assert model.config["text_embed_dim"] == unet["context_in_dim"]
    assert (
        list(model.config["patch_size"]) == unet["patch_size"]
        and list(model.config["rope_axes_dim"]) == unet["axes_dim"]
    )
    assert unet["byt5"] and model.config["text_embed_2_dim"] == 32 and not model.config["guidance_embeds"]
    assert model.module.context_embedder_2.linear_1.out_features == 64  # the file's width, not diffusers' 2048
    assert model.sampling == sampling_config("hunyuan_image") == {"kind": "flow", "shift": 5.0, "multiplier": 1000}


@pytest.mark.parametrize("case", FIXTURE["transformer"], ids=lambda c: f"seed{c['seed']}")
def test_transformer_output_equals_comfyui(model, case):
    x, context = draws(case["seed"], case["shape"], [case["shape"][0], case["tokens"], 32])
    assert float(x.sum() + context.sum()) == pytest.approx(case["input_sum"], rel=1e-6)
    with torch.no_grad():
        out = model.apply(x, torch.tensor(case["timesteps"]), {"context": context})
    expected = tensor(case["out"])
    assert torch.allclose(at_recorded(out, case["out"]), expected, atol=TOL, rtol=0)
    assert out.shape == torch.Size(case["shape"])


def test_denoised_latent_format_and_sampling_equal_comfyui(model):
    rec = FIXTURE["denoised"]
    x, context = draws(rec["seed"], rec["shape"], [1, rec["tokens"], 32])
    fmt = latent_format("hunyuan_image")
    assert torch.allclose(fmt.process_in(x), tensor(rec["process_in"]), atol=1e-6)
    assert torch.allclose(fmt.process_out(x), tensor(rec["process_out"]), atol=1e-6)
    ms = model_sampling_from_config(model.sampling)
    sampling = rec["sampling"]
    assert float(ms.sigma_max) == pytest.approx(sampling["sigma_max"]) and float(ms.sigma_min) == pytest.approx(
        sampling["sigma_min"], rel=1e-6
    )
    assert ms.timestep(torch.tensor(sampling["sigmas"])).tolist() == pytest.approx(sampling["timesteps"], rel=1e-6)
    sigma = torch.tensor([rec["sigma"]])
    with torch.no_grad():
        out = model.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), {"context": context})
    denoised = ms.calculate_denoised(sigma, out, x)
    assert torch.allclose(denoised, tensor(rec["denoised"]), atol=TOL, rtol=0)


def test_vae_decode_and_encode_equal_comfyui(vae):
    rec = FIXTURE["vae"]
    g = torch.Generator().manual_seed(rec["seed"])
    latent = torch.randn(rec["latent_shape"], generator=g)
    pixels = torch.rand(rec["pixels_shape"], generator=g)
    assert float(latent.sum() + pixels.sum()) == pytest.approx(rec["input_sum"], rel=1e-6)
    assert (vae.latent_channels, vae.downscale) == (64, 32)
    decoded = vae.decode(latent)
    assert list(decoded.shape) == rec["decoded"]["shape"]
    assert torch.allclose(at_recorded(decoded, rec["decoded"]), tensor(rec["decoded"]), atol=TOL, rtol=0)
    encoded = vae.encode(pixels)
    assert torch.allclose(encoded, tensor(rec["encoded"]), atol=TOL, rtol=0)


@pytest.mark.parametrize("case", FIXTURE["refiner_latent"], ids=lambda c: f"seed{c['seed']}")
def test_refiner_latent_node_equals_comfyui(case):
    latent, cond = draws(case["seed"], case["shape"], [1, 4, 8])
    pos, neg, out = HunyuanRefinerLatent().execute(
        [[cond, {"pooled_output": None}]], [[cond * 2, {}]], {"samples": latent}, case["noise_augmentation"]
    )
    assert sorted(pos[0][1]) == case["positive_keys"] and sorted(neg[0][1]) == case["negative_keys"]
    assert torch.equal(pos[0][1]["concat_latent_image"], latent) == case["concat_is_latent"]
    assert [pos[0][1]["noise_augmentation"], neg[0][1]["noise_augmentation"]] == case["augmentation_out"]
    assert list(out["samples"].shape) == case["latent_out_shape"]
    assert float(out["samples"].abs().sum()) == case["latent_out_abs_sum"]


@pytest.fixture(scope="module")
def text_encoder(files):
    ref = make_ref("text_encoder", "hunyuan_image", [files["text_encoder"]], clip_type="hunyuan_image")
    return loader.load_text_encoder(ref)


@pytest.mark.parametrize("name", sorted(FIXTURE["text"]))
def test_text_encoder_tokens_and_conditioning_equal_comfyui(text_encoder, name):
    rec = FIXTURE["text"][name]
    encoder = text_encoder if rec["layer"] is None else dataclasses.replace(text_encoder, layer=rec["layer"])
    tokens = encoder.tokenize(rec["prompt"])
    assert [t for t, _ in tokens["qwen25_7b"][0]] == rec["ids"]
    cond, pooled = encoder.encode(tokens)
    assert pooled is None and rec["extra_keys"] == []  # no masked token: ComfyUI drops the mask
    assert cond.shape == tensor(rec["cond"]).shape
    assert torch.allclose(cond, tensor(rec["cond"]), atol=TOL, rtol=0)


def test_text_encoder_layer_choice_and_refiner_cut_matter():
    text = FIXTURE["text"]
    assert not torch.allclose(tensor(text["plain"]["cond"]), tensor(text["plain_layer_-2"]["cond"]), atol=1e-3)
    refiner = text["refiner_chat"]
    assert refiner["ids"][0] == 27 and len(refiner["ids"]) > 36  # the refiner rule: cut at 36
    assert tensor(refiner["cond"]).shape[1] == len(refiner["ids"]) - 36


@pytest.fixture(scope="module")
def distilled(files):
    return loader.load_diffusion_model(make_ref("diffusion_model", "hunyuan_image", [files["distilled"]]))


def test_distilled_model_reads_guidance_and_the_schedule(distilled):
    assert distilled.config["guidance_embeds"] and distilled.config["use_meanflow"]
    assert distilled.reads_schedule  # the denoise step hands it the sampler's sigmas


@pytest.mark.parametrize("case", FIXTURE["distilled"], ids=lambda c: f"seed{c['seed']}")
def test_distilled_output_equals_comfyui(distilled, case):
    shape = case["shape"]
    x, context = draws(case["seed"], shape, [shape[0], case["tokens"], 32])
    assert float(x.sum() + context.sum()) == pytest.approx(case["input_sum"], rel=1e-6)
    cond = {"context": context, "guidance": case["guidance"], "sample_sigmas": torch.tensor(case["schedule"])}
    with torch.no_grad():
        out = distilled.apply(x, torch.full((shape[0],), case["sigma"] * 1000.0), cond)
    assert torch.allclose(at_recorded(out, case["out"]), tensor(case["out"]), atol=TOL, rtol=0)


@pytest.fixture(scope="module")
def dual_text_encoder(files):
    paths = [files["byt5"], files["text_encoder"]]  # either order: the ByT5 file is told by its T5 names
    return loader.load_text_encoder(make_ref("text_encoder", "hunyuan_image", paths, clip_type="hunyuan_image"))


@pytest.mark.parametrize("name", sorted(FIXTURE["text_with_byt5"]))
def test_text_with_glyph_encoder_equals_comfyui(dual_text_encoder, name):
    rec = FIXTURE["text_with_byt5"][name]
    encoder = dual_text_encoder if rec["layer"] is None else dataclasses.replace(dual_text_encoder, layer=rec["layer"])
    tokens = encoder.tokenize(rec["prompt"])
    assert [t for t, _ in tokens["qwen25_7b"][0]] == rec["ids"]
    assert ([t for t, _ in tokens["byt5"][0]] if "byt5" in tokens else None) == rec["byt5_ids"]
    cond, _ = encoder.encode(tokens)
    assert torch.allclose(cond, tensor(rec["cond"]), atol=TOL, rtol=0)
    extras = encoder.extras(tokens)
    if rec["byt5"] is None:
        assert extras == {} and rec["extra_keys"] == []
    else:
        assert rec["extra_keys"] == ["conditioning_byt5small"]
        states = extras["conditioning_byt5small"]
        assert states.shape == tensor(rec["byt5"]).shape
        assert torch.allclose(states, tensor(rec["byt5"]), atol=TOL, rtol=0)


def test_quoted_text_reaches_the_glyph_encoder():
    quoted = FIXTURE["text_with_byt5"]["quoted"]
    assert quoted["byt5_ids"][-1] == 1 and bytes(t - 3 for t in quoted["byt5_ids"][:-1]).decode() == (
        'Text "OPEN". Text "bienvenue". '
    )


def test_transformer_with_byt5_states_equals_comfyui(model):
    rec = FIXTURE["transformer_with_byt5"]
    x, context, byt5 = draws(
        rec["seed"], rec["shape"], [1, rec["tokens"], 32], [1, rec["byt5_tokens"], rec["byt5_width"]]
    )
    assert float(x.sum() + context.sum() + byt5.sum()) == pytest.approx(rec["input_sum"], rel=1e-6)
    with torch.no_grad():
        out = model.apply(x, torch.tensor([rec["timestep"]]), {"context": context, "conditioning_byt5small": byt5})
        without = model.apply(x, torch.tensor([rec["timestep"]]), {"context": context})
    assert torch.allclose(at_recorded(out, rec["out"]), tensor(rec["out"]), atol=TOL, rtol=0)
    assert not torch.allclose(at_recorded(without, rec["out"]), tensor(rec["out"]), atol=1e-3)


def test_loras_are_refused_by_name(files):
    from cluster.refs import Patch

    ref = make_ref("diffusion_model", "hunyuan_image", [files["transformer"]])
    ref = dataclasses.replace(ref, patches=(Patch(str(files["transformer"]), "0" * 64, 1.0),))
    with pytest.raises(ModelLoadError, match="LoRAs on Hunyuan Image 2.1"):
        loader.load_diffusion_model(ref)
