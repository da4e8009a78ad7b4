"""Qwen-Image support checked against ComfyUI 0.3.64 on qwen-image-tiny's files.

tests/models/fixtures/comfyui_qwen_image.json.xz was recorded by scripts/record_comfyui_qwen_image.py (ComfyUI commit
a125cd84) from the files nodes.models.qwen_image_demo writes, loaded by ComfyUI's UNETLoader, CLIPLoader
(type qwen_image) and VAELoader: its tokenizer's ids, its text encoder's conditioning, its transformer's raw
output, its whole model's denoised prediction and model sampling, its VAE's decode and encode. The files are
built here again (same seed, same bytes: the fixture's sha256 says so) and tested in ComfyUI's layouts."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from nodes.arch import sampling_config
from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.components import WAN21_LATENT
from nodes.models.detect import probe
from nodes.models.errors import ModelLoadError
from nodes.models.qwen_image_demo import (
    FILES,
    build_demo_qwen_image,
    tiny_qwen_image_state_dicts,
)
from nodes.models.qwen_image_vae import diffusers_names, wan_vae_keys
from nodes.sampling.model_sampling import model_sampling_from_config
from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_qwen_image.json.xz")
ATOL, RTOL = 2e-5, 1e-4


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("qwen-image") / "models"
    build_demo_qwen_image(root)
    return root


def path_of(models: Path, part: str) -> Path:
    return models / FILES[part]


@pytest.fixture(scope="module")
def text_encoder(models):
    return loader.load_text_encoder(
        make_ref("text_encoder", "qwen_image", [path_of(models, "text_encoder")], clip_type="qwen_image")
    )


@pytest.fixture(scope="module")
def transformer(models):
    return loader.load_diffusion_model(make_ref("diffusion_model", "qwen_image", [path_of(models, "transformer")]))


@pytest.fixture(scope="module")
def vae(models):
    return loader.load_vae(make_ref("vae", "qwen_image", [path_of(models, "vae")]))


def test_demo_files_are_the_recorded_ones(models) -> None:
    for part, rec in FIXTURE["files"].items():
        assert rec["path"] == FILES[part]
        assert hashlib.sha256(path_of(models, part).read_bytes()).hexdigest() == rec["sha256"], (
            f"{FILES[part]} changed: re-record tests/models/fixtures/comfyui_qwen_image.json.xz"
        )


def test_files_have_comfyuis_key_layouts_and_are_detected(models) -> None:
    sds = tiny_qwen_image_state_dicts()
    assert {
        "txt_norm.weight",
        "img_in.weight",
        "transformer_blocks.1.attn.add_q_proj.weight",
        "transformer_blocks.0.img_mod.1.weight",
        "norm_out.linear.weight",
        "proj_out.weight",
    } <= set(sds["transformer"])
    assert {"model.embed_tokens.weight", "model.layers.1.self_attn.k_proj.bias", "model.norm.weight"} <= set(
        sds["text_encoder"]
    )
    assert sds["text_encoder"]["model.embed_tokens.weight"].shape[0] == 152_064  # the real vocabulary
    assert sorted(sds["vae"]) == sorted(wan_vae_keys())
    assert {
        "encoder.downsamples.5.time_conv.weight",
        "decoder.upsamples.4.shortcut.weight",
        "conv1.weight",
        "decoder.head.2.weight",
    } <= set(sds["vae"])
    infos = {part: probe(path_of(models, part)) for part in FILES}
    assert (infos["transformer"].arch, infos["transformer"].kind) == ("qwen_image", "diffusion_model")
    assert (infos["text_encoder"].arch, infos["text_encoder"].kind) == ("qwen25", "text_encoder")
    assert (infos["vae"].arch, infos["vae"].kind) == ("qwen_image", "vae")


def test_wan_names_map_one_to_one_onto_diffusers(vae) -> None:
    names = diffusers_names()
    assert len(set(names.values())) == len(names) == len(wan_vae_keys())
    assert set(names.values()) == set(vae.module.state_dict())


def test_hyperparameters_are_read_from_the_shapes(transformer, text_encoder, vae) -> None:
    cfg = transformer.config
    assert (
        cfg["num_layers"],
        cfg["num_attention_heads"],
        cfg["attention_head_dim"],
        cfg["joint_attention_dim"],
        cfg["in_channels"],
        cfg["out_channels"],
    ) == (2, 1, 128, 32, 64, 16)
    te = text_encoder.modules["qwen25_7b"].config
    assert (
        te.hidden_size,
        te.num_hidden_layers,
        te.num_attention_heads,
        te.num_key_value_heads,
        te.head_dim,
        te.vocab_size,
    ) == (32, 2, 2, 1, 128, 152_064)
    assert (vae.module.config.base_dim, vae.latent_channels, vae.downscale) == (8, 16, 8)


def test_prefixed_checkpoint_loads_each_component(tmp_path) -> None:
    """The all-in-one layout ComfyUI's QwenImage model config names: model.diffusion_model., vae.,
    text_encoders.qwen25_7b.transformer."""
    sds = tiny_qwen_image_state_dicts()
    prefixes = {
        "transformer": "model.diffusion_model.",
        "vae": "vae.",
        "text_encoder": "text_encoders.qwen25_7b.transformer.",
    }
    path = tmp_path / "qwen_image_tiny_ckpt.safetensors"
    save_file({prefixes[p] + k: v for p, sd in sds.items() for k, v in sd.items()}, str(path))
    info = probe(path)
    assert (info.arch, info.kind, info.components) == (
        "qwen_image",
        "checkpoint",
        frozenset({"diffusion_model", "vae", "text_encoder"}),
    )
    assert loader.load_diffusion_model(make_ref("diffusion_model", "qwen_image", [path])).config["num_layers"] == 2
    assert loader.load_vae(make_ref("vae", "qwen_image", [path])).latent_channels == 16
    assert loader.load_text_encoder(make_ref("text_encoder", "qwen_image", [path])).num_layers == 2


def test_wan22_vae_is_told_apart_and_refused_for_qwen_image(tmp_path) -> None:
    """The Wan 2.2 VAE is Wan 2.2 5B's (nodes.models.wan22_vae), not Qwen-Image's."""
    from nodes.models.qwen_image_vae import load_vae

    sd = {**tiny_qwen_image_state_dicts()["vae"], "decoder.upsamples.0.upsamples.0.residual.2.weight": torch.zeros(1)}
    path = tmp_path / "wan2.2_vae.safetensors"
    save_file(sd, str(path))
    assert (probe(path).arch, probe(path).kind) == ("wan22_5b", "vae")
    with pytest.raises(ModelLoadError, match="Wan 2.2"):
        load_vae(make_ref("vae", "qwen_image", [path]), sd)


def test_latent_format_is_comfyuis_wan21_and_diffusers_statistics() -> None:
    import inspect

    from diffusers import AutoencoderKLQwenImage

    params = inspect.signature(AutoencoderKLQwenImage.__init__).parameters
    assert list(WAN21_LATENT.latents_mean) == params["latents_mean"].default
    assert list(WAN21_LATENT.latents_std) == params["latents_std"].default
    rec = FIXTURE["denoised"]
    x = inputs(rec, 32)[0][:, :, 0]
    torch.testing.assert_close(WAN21_LATENT.process_in(x), tensor(rec["process_in"])[:, :, 0], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(WAN21_LATENT.process_out(x), tensor(rec["process_out"])[:, :, 0], atol=1e-6, rtol=1e-6)


def inputs(case: dict, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    # The recording script's draws, in its order.
    g = torch.Generator().manual_seed(case["seed"])
    return torch.randn(case["shape"], generator=g), torch.randn(case["shape"][0], case["tokens"], width, generator=g)


@pytest.mark.parametrize("name", sorted(FIXTURE["tokens"]))
def test_tokens_equal_comfyuis(text_encoder, name: str) -> None:
    rec = FIXTURE["tokens"][name]
    assert [t for t, _ in text_encoder.tokenize(rec["prompt"])["qwen25_7b"][0]] == rec["ids"]


@pytest.mark.parametrize("name", sorted(FIXTURE["text"]))
def test_conditioning_equals_comfyuis(models, name: str) -> None:
    rec = FIXTURE["text"][name]
    ref = make_ref("text_encoder", "qwen_image", [path_of(models, "text_encoder")], clip_type="qwen_image")
    if rec["layer"] is not None:
        ref = ref.with_option("layer", rec["layer"])
    te = loader.load_text_encoder(ref)
    cond, pooled = te.encode(te.tokenize(rec["prompt"]))
    assert pooled is None and rec["pooled_is_none"]
    torch.testing.assert_close(cond, tensor(rec["cond"]), atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("index", range(len(FIXTURE["transformer"])))
def test_forward_equals_comfyuis(transformer, index: int) -> None:
    case = FIXTURE["transformer"][index]
    x, context = inputs(case, 32)
    expected = tensor(case["out"])
    out = transformer.apply(x, torch.tensor(case["timesteps"]), {"context": context})  # ComfyUI's [B,16,1,H,W]
    torch.testing.assert_close(out, expected, atol=ATOL, rtol=RTOL)
    flat = transformer.apply(x[:, :, 0], torch.tensor(case["timesteps"]), {"context": context})
    torch.testing.assert_close(flat, expected[:, :, 0], atol=ATOL, rtol=RTOL)


def test_denoised_and_sampling_equal_comfyuis(transformer) -> None:
    rec = FIXTURE["denoised"]
    assert rec["sampling"]["class"] == "ModelSampling"  # ComfyUI's ModelSamplingFlux (shift 1.15) + CONST
    ms = model_sampling_from_config(sampling_config("qwen_image"))
    assert float(ms.sigma_max) == pytest.approx(rec["sampling"]["sigma_max"], abs=1e-7)
    assert float(ms.sigma_min) == pytest.approx(rec["sampling"]["sigma_min"], abs=1e-7)
    torch.testing.assert_close(
        ms.timestep(torch.tensor(rec["sampling"]["sigmas"])).float(), torch.tensor(rec["sampling"]["timesteps"])
    )
    x, context = inputs(rec, 32)
    x = x[:, :, 0]
    sigma = torch.tensor([rec["sigma"]])
    out = transformer.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), {"context": context})
    torch.testing.assert_close(
        ms.calculate_denoised(sigma, out, x), tensor(rec["denoised"])[:, :, 0], atol=ATOL, rtol=RTOL
    )


def test_vae_decode_and_encode_equal_comfyuis(vae) -> None:
    rec = FIXTURE["vae"]
    g = torch.Generator().manual_seed(rec["seed"])
    latent, pixels = torch.randn(rec["latent_shape"], generator=g), torch.rand(rec["pixels_shape"], generator=g)
    decoded = tensor(rec["decoded"])  # ComfyUI's [B,T,H,W,3]; VAEDecode folds T into the batch
    torch.testing.assert_close(vae.decode(latent), decoded.reshape(-1, *decoded.shape[2:]), atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(vae.decode(latent[:, :, 0]), decoded[:, 0], atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(vae.encode(pixels), tensor(rec["encoded"])[:, :, 0], atol=ATOL, rtol=RTOL)


def fp8_variant(sd: dict[str, torch.Tensor], part: str) -> dict[str, torch.Tensor]:
    """The recording script's fp8 files (ComfyUI's fp8 download layouts), made the same way: the transformer's
    linear weights as float8_e4m3fn; the text encoder's layer weights as float8 with a per-tensor float32
    `scale_weight` (max |w| / 448) and the `scaled_fp8` marker."""
    out = {}
    for k, v in sd.items():
        if part == "transformer" and v.dim() == 2:
            out[k] = v.to(torch.float8_e4m3fn)
        elif part == "text_encoder" and v.dim() == 2 and k.startswith("model.layers."):
            scale = v.float().abs().max() / 448.0
            out[k] = (v.float() / scale).to(torch.float8_e4m3fn)
            out[k[: -len("weight")] + "scale_weight"] = scale.reshape(())
        else:
            out[k] = v
    if part == "text_encoder":
        out["scaled_fp8"] = torch.empty(0, dtype=torch.float8_e4m3fn)
    return out


@pytest.fixture(scope="module")
def fp8_files(tmp_path_factory) -> dict[str, Path]:
    from safetensors.torch import load_file

    root = tmp_path_factory.mktemp("qwen-image-fp8")
    tiny = tmp_path_factory.mktemp("qwen-image-bf16")
    build_demo_qwen_image(tiny)
    paths = {}
    for part, rel in FIXTURE["fp8"]["files"].items():
        paths[part] = root / Path(rel).name
        save_file(fp8_variant(load_file(str(tiny / FILES[part])), part), str(paths[part]))
    return paths


def test_fp8_files_load_and_equal_comfyuis(fp8_files) -> None:
    """ComfyUI's fp8 downloads: a float8 transformer (cast exactly) and a scaled-fp8 text encoder (weight
    times scale) give ComfyUI's numbers on the same files."""
    rec = FIXTURE["fp8"]
    assert probe(fp8_files["text_encoder"]).arch == "qwen25"
    te = loader.load_text_encoder(
        make_ref("text_encoder", "qwen_image", [fp8_files["text_encoder"]], clip_type="qwen_image")
    )
    cond, _ = te.encode(te.tokenize(rec["text"]["prompt"]))
    torch.testing.assert_close(cond, tensor(rec["text"]["cond"]), atol=ATOL, rtol=RTOL)
    model = loader.load_diffusion_model(make_ref("diffusion_model", "qwen_image", [fp8_files["transformer"]]))
    case = rec["transformer"]
    x, context = inputs(case, 32)
    out = model.apply(x, torch.tensor(case["timesteps"]), {"context": context})
    torch.testing.assert_close(out, tensor(case["out"]), atol=ATOL, rtol=RTOL)
    plain = FIXTURE["transformer"][0]  # the same inputs on the bf16 file: fp8 changes the numbers
    assert not torch.allclose(tensor(plain["out"]), tensor(case["out"]), atol=1e-3)


def test_scaled_fp8_weights_are_weight_times_scale() -> None:
    from nodes.models.fp8 import dequantize_scaled_fp8

    w = torch.tensor([[1.0, -2.0], [0.5, 4.0]]).to(torch.float8_e4m3fn)
    sd = {
        "a.weight": w,
        "a.scale_weight": torch.tensor(0.25),
        "a.scale_input": torch.tensor(1.0),
        "a.bias": torch.tensor([1.0, 0.3]),
        "b.bias": torch.tensor([0.3]),
        "scaled_fp8": torch.empty(0, dtype=torch.float8_e4m3fn),
    }
    out = dequantize_scaled_fp8(sd)
    assert sorted(out) == ["a.bias", "a.weight", "b.bias"]
    assert torch.equal(out["a.weight"], torch.tensor([[0.25, -0.5], [0.125, 1.0]]))
    # ComfyUI builds a scaled layer in fp8, bias included: 0.3 becomes fp8's 0.3125; other tensors stay.
    assert torch.equal(out["a.bias"], torch.tensor([1.0, 0.3125])) and torch.equal(out["b.bias"], sd["b.bias"])
    plain = {"c.weight": w}
    assert dequantize_scaled_fp8(plain) == plain


def test_real_sizes_are_inferred_from_the_released_shapes() -> None:
    """The released Qwen-Image's shapes (built on the meta device: no memory) give ComfyUI 0.3.64's fixed
    sizes: 60 blocks of 24 heads x 128, 3584-wide text; Qwen2.5-VL-7B's 28 layers of 28 query and 4 key/value
    heads, 18,944-wide MLPs; the Wan VAE's base width 96. Every tensor finds its place."""
    from diffusers import AutoencoderKLQwenImage, QwenImageTransformer2DModel
    from transformers import Qwen2Config, Qwen2Model

    from cluster.refs import ModelRef
    from nodes.models import qwen_image, qwen_image_text, qwen_image_vae

    with torch.device("meta"):
        transformer = QwenImageTransformer2DModel().state_dict()  # diffusers' defaults are the released sizes
        text = Qwen2Model(
            Qwen2Config(
                vocab_size=152_064,
                hidden_size=3584,
                intermediate_size=18_944,
                num_hidden_layers=28,
                num_attention_heads=28,
                num_key_value_heads=4,
            )
        )
        vae = qwen_image_vae.diffusers_to_wan(AutoencoderKLQwenImage().state_dict())
    ref = ModelRef("diffusion_model", "qwen_image", (), ())
    prefixed = {f"model.diffusion_model.{k}": v for k, v in transformer.items()}
    assert probe_shapes(prefixed) == ("qwen_image", "diffusion_model")
    model = qwen_image.load_diffusion_model(ref, prefixed)
    assert {
        k: model.config[k]
        for k in (
            "num_layers",
            "num_attention_heads",
            "attention_head_dim",
            "joint_attention_dim",
            "in_channels",
            "out_channels",
        )
    } == {
        "num_layers": 60,
        "num_attention_heads": 24,
        "attention_head_dim": 128,
        "joint_attention_dim": 3584,
        "in_channels": 64,
        "out_channels": 16,
    }
    file_sd = {f"model.{k}": v for k, v in text.state_dict().items()}
    file_sd["visual.blocks.0.attn.qkv.weight"] = torch.empty(3840, 1280, device="meta")  # not read for text
    file_sd["lm_head.weight"] = torch.empty(152_064, 3584, device="meta")
    assert probe_shapes(file_sd) == ("qwen25", "text_encoder")
    cfg = qwen_image_text.build_qwen25(qwen_image_text.language_model(file_sd), None).config
    assert (
        cfg.hidden_size,
        cfg.num_hidden_layers,
        cfg.num_attention_heads,
        cfg.num_key_value_heads,
        cfg.intermediate_size,
        cfg.head_dim,
        cfg.vocab_size,
    ) == (3584, 28, 28, 4, 18_944, 128, 152_064)
    assert probe_shapes(vae) == ("qwen_image", "vae")
    wan = qwen_image_vae.load_vae(ModelRef("vae", "qwen_image", (), ()), vae)
    assert (wan.module.config.base_dim, wan.latent_channels) == (96, 16)


def probe_shapes(sd: dict[str, torch.Tensor]) -> tuple[str, str]:
    from nodes.models.detect import classify

    info = classify({k: tuple(v.shape) for k, v in sd.items()}, "released.safetensors")
    return info.arch, info.kind


LORA_LAYERS = (
    ("transformer.transformer_blocks.0.attn.to_q", "peft"),
    ("lora_unet_transformer_blocks_1_img_mlp_net_0_proj", "kohya"),
    ("transformer_blocks.1.attn.add_k_proj", "kohya"),
    ("diffusion_model.img_in", "peft"),
    ("lycoris_transformer_blocks_0_txt_mod_1", "kohya"),
)


def tiny_lora(shapes: dict[str, tuple[int, ...]]) -> dict[str, torch.Tensor]:
    """The recording script's LoRA, drawn alike: rank 4 on five layers named in each of the ways ComfyUI
    accepts for Qwen-Image (transformer., lora_unet_, bare, diffusion_model., lycoris_), peft and kohya."""
    g = torch.Generator().manual_seed(11)
    out = {}
    for name, kind in LORA_LAYERS:
        layer = name
        for prefix in ("transformer.", "diffusion_model.", "lora_unet_", "lycoris_"):
            layer = layer[len(prefix) :] if layer.startswith(prefix) else layer
        rows, cols = shapes[next(k for k in shapes if k.replace(".", "_") == layer.replace(".", "_") + "_weight")]
        down, up = torch.randn(4, cols, generator=g) * 0.1, torch.randn(rows, 4, generator=g) * 0.1
        if kind == "peft":
            out.update({f"{name}.lora_A.weight": down, f"{name}.lora_B.weight": up})
        else:
            out.update(
                {f"{name}.lora_down.weight": down, f"{name}.lora_up.weight": up, f"{name}.alpha": torch.tensor(2.0)}
            )
    return out


def test_lora_merges_as_comfyuis(models, tmp_path) -> None:
    from cluster.refs import Patch, file_digest

    rec = FIXTURE["lora"]
    shapes = {k: tuple(v.shape) for k, v in tiny_qwen_image_state_dicts()["transformer"].items()}
    path = tmp_path / Path(rec["file"]).name
    save_file(tiny_lora(shapes), str(path))
    assert (probe(path).arch, probe(path).kind) == ("qwen_image", "lora")
    ref = make_ref("diffusion_model", "qwen_image", [path_of(models, "transformer")]).with_patch(
        Patch(str(path), file_digest(path), rec["strength"])
    )
    model = loader.load_diffusion_model(ref)
    case = rec["transformer"]
    x, context = inputs(case, 32)
    out = model.apply(x, torch.tensor(case["timesteps"]), {"context": context})
    torch.testing.assert_close(out, tensor(case["out"]), atol=ATOL, rtol=RTOL)
    assert not torch.allclose(tensor(case["out"]), tensor(FIXTURE["transformer"][0]["out"]), atol=1e-3)


def test_transformer_only_lora_leaves_the_text_encoder_alone(models, tmp_path) -> None:
    """LoraLoader gives its LoRA to the CLIP too: a transformer-only Qwen-Image LoRA changes nothing there (as in
    ComfyUI), a LoRA with text-encoder weights is refused."""
    from cluster.refs import Patch, file_digest

    shapes = {k: tuple(v.shape) for k, v in tiny_qwen_image_state_dicts()["transformer"].items()}
    path = tmp_path / "transformer_only.safetensors"
    save_file(tiny_lora(shapes), str(path))
    te_path = path_of(models, "text_encoder")
    plain = loader.load_text_encoder(make_ref("text_encoder", "qwen_image", [te_path], clip_type="qwen_image"))
    patched = loader.load_text_encoder(
        make_ref("text_encoder", "qwen_image", [te_path], clip_type="qwen_image").with_patch(
            Patch(str(path), file_digest(path), 1.0)
        )
    )
    tokens = plain.tokenize("a red cube")
    assert torch.equal(plain.encode(tokens)[0], patched.encode(tokens)[0])
    te_lora = tmp_path / "with_text_encoder.safetensors"
    save_file(
        {
            **tiny_lora(shapes),
            "lora_te_model_layers_0_self_attn_q_proj.lora_down.weight": torch.zeros(4, 32),
            "lora_te_model_layers_0_self_attn_q_proj.lora_up.weight": torch.zeros(256, 4),
        },
        str(te_lora),
    )
    with pytest.raises(ModelLoadError, match="text encoder"):
        loader.load_text_encoder(
            make_ref("text_encoder", "qwen_image", [te_path], clip_type="qwen_image").with_patch(
                Patch(str(te_lora), file_digest(te_lora), 1.0)
            )
        )
