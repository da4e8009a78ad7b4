"""Mage-Flow: detection of the published layouts (the DiT in Qwen-Image's names at patch size 1, the Mage-VAE's
student/pipeline halves, CLIPLoader type mage on a Qwen3-VL file), and what the DiT, the VAE and the text encoder
compute on the tiny demo files, against today's ComfyUI's own module code run on the same files
(scripts/record_comfyui_mage_flow.py: comfy/ldm/mage_flow/model.py dd5f2bc5 and vae.py 7ee34e9d inside ComfyUI
0.10.0; the text encoder's templates and prefix strip of comfy/text_encoders/mage_flow.py on transformers'
Qwen3-VL, which ComfyUI's qwen3vl.py reimplements)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from nodes.arch import latent_format, sampling_config
from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.components import FLUX2_LATENT
from nodes.models.detect import probe
from nodes.models.errors import ModelLoadError
from nodes.models.mage_flow import timestep_sinusoid
from nodes.models.mage_flow_demo import FILES
from nodes.models.mage_flow_text import template_end
from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = Path(__file__).parent / "fixtures" / "comfyui_mage_flow.json"
TEXT_ENCODER = "text_encoders/qwen3vl_8b_tiny.safetensors"


@pytest.fixture(scope="module")
def record() -> dict:
    return load_json(FIXTURE)


@pytest.fixture(scope="module")
def models(demo_workspace) -> Path:
    return demo_workspace.root / "models"


@pytest.fixture(scope="module")
def dit(models):
    return loader.load_diffusion_model(make_ref("diffusion_model", "mage_flow", [models / FILES["transformer"]]))


@pytest.fixture(scope="module")
def vae(models):
    return loader.load_vae(make_ref("vae", "mage_flow", [models / FILES["vae"]]))


@pytest.fixture(scope="module")
def text_encoder(models):
    ref = make_ref("text_encoder", "mage_flow", [models / TEXT_ENCODER], clip_type="mage")
    return loader.load_text_encoder(ref)


def test_recorded_on_these_files(record, models):
    from scripts.comfyui_recording import sha256

    assert record["files"] == {name: sha256(str(models / path)) for name, path in FILES.items()}
    assert record["text_encoder"] == sha256(str(models / TEXT_ENCODER))


def test_published_layouts_are_detected(models):
    dit_keys = set(load_file(models / FILES["transformer"]))
    assert {
        "img_in.weight",
        "txt_norm.weight",
        "transformer_blocks.1.img_mlp.net.2.weight",
        "proj_out.weight",
    } <= dit_keys
    assert (probe(models / FILES["transformer"]).arch, probe(models / FILES["transformer"]).kind) == (
        "mage_flow",
        "diffusion_model",
    )
    vae_keys = set(load_file(models / FILES["vae"]))
    assert "student.dconv_encoder.proj_out.weight" in vae_keys
    assert any(k.startswith("pipeline.y_embedder.encoder.") for k in vae_keys)  # the anchor VAE, dropped
    assert (probe(models / FILES["vae"]).arch, probe(models / FILES["vae"]).kind) == ("mage_flow", "vae")
    # Qwen-Image's own files (img_in reading 2x2 patches of 16 channels) stay Qwen-Image
    assert probe(models / "diffusion_models/qwen_image_tiny.safetensors").arch == "qwen_image"


def test_model_settings(dit):
    assert dit.latent_format is FLUX2_LATENT is latent_format("mage_flow")
    assert dit.sampling == sampling_config("mage_flow") == {"kind": "flow", "shift": 6.0, "multiplier": 1.0}
    assert dit.config["patch_size"] == 1 and dit.config["num_layers"] == 2


def test_timestep_sinusoid_rounds_to_bfloat16():
    t = torch.tensor([0.7311])
    emb = timestep_sinusoid(t)
    exact = torch.exp(-torch.log(torch.tensor(10000.0)) * torch.arange(128) / 128)
    unrounded = 1000.0 * 0.7311 * exact
    assert not torch.allclose(emb[0, :128], torch.cos(unrounded), atol=1e-3)  # the rounding matters
    rounded = 1000.0 * t.to(torch.bfloat16).float() * exact.to(torch.bfloat16).float()
    assert torch.equal(emb[0], torch.cat([torch.cos(rounded), torch.sin(rounded)]))


def test_dit_step_equals_comfyui(record, dit, fixed_threads):
    width = dit.module.config.joint_attention_dim
    for case in record["dit"]:
        gen = torch.Generator().manual_seed(case["seed"])
        h, w = case["shape"]
        x = torch.randn(1, 128, h, w, generator=gen)
        context = torch.randn(1, 9, width, generator=gen)
        refs = [torch.randn(1, 128, rh, rw, generator=gen) for rh, rw in case["refs"]]
        assert float(x.sum()) == pytest.approx(case["input_sum"], rel=1e-6)
        cond = {"context": context, **({"ref_latents": refs} if refs else {})}
        out = dit.apply(x, torch.tensor([case["sigma"]]), cond)
        expected = tensor(case["out"])
        assert out.shape == expected.shape
        assert (out - expected).abs().max() < 1e-5, (case["seed"], float((out - expected).abs().max()))


def test_vae_equals_comfyui(record, vae, fixed_threads):
    for case in record["vae"]:
        gen = torch.Generator().manual_seed(case["seed"])
        h, w = case["shape"]
        pixels = torch.rand(1, h, w, 3, generator=gen)
        latent = vae.encode(pixels)
        expected = tensor(case["latent"])
        assert latent.shape == expected.shape == (1, 128, h // 16, w // 16)
        assert (latent - expected).abs().max() < 1e-5
        image = vae.decode(expected)
        assert (at_recorded(image, case["image"]) - tensor(case["image"])).abs().max() < 1e-5


def test_text_encoder_equals_comfyui(record, text_encoder, fixed_threads):
    for case in record["text"]:
        if case["image"] is None:
            cond, pooled = text_encoder.encode(text_encoder.tokenize(case["prompt"]))
        else:
            gen = torch.Generator().manual_seed(case["image"]["seed"])
            picture = torch.rand(1, *case["image"]["shape"], 3, generator=gen)
            tokens = text_encoder.tokenize(case["prompt"], images=1)
            cond, pooled = text_encoder.encode(tokens, [picture])
        expected = tensor(case["cond"])
        assert pooled is None
        assert cond.shape == expected.shape, (case["prompt"], cond.shape, expected.shape)
        assert (cond - expected).abs().max() < 1e-5, case["prompt"]


def test_template_strip_counts_from_the_second_chat_start():
    # <|im_start|> system ... <|im_start|> user \n text: dropped up to and with "user\n"
    assert template_end([151644, 9, 9, 151645, 198, 151644, 872, 198, 5, 6]) == 8
    assert template_end([151644, 872, 198, 5, 6]) == 3  # one chat start: that one
    assert template_end([5, 6, 7]) == -1  # none: ComfyUI keeps only the last token


def test_other_files_are_refused_with_type_mage(models):
    from nodes.loaders import CLIPLoader

    with pytest.raises(ValueError, match="type mage loads Mage-Flow's Qwen3-VL-4B"):
        CLIPLoader().load_clip("flux-tiny-t5.safetensors", "mage")
    with pytest.raises(ModelLoadError, match="holds no VAE"):
        loader.load_vae(make_ref("vae", "mage_flow", [models / FILES["transformer"]]))


def test_the_published_int8_convrot_layout_loads_its_dequantized_weights(tmp_path, models):
    """The templates' mage_flow*_int8_convrot files: bare names, linear weights as comfy-kitchen's int8 ConvRot codes
    with `weight_scale` and a `comfy_quant` config beside them; detected as Mage-Flow (img_in's int8 codes keep
    its [width, 128] shape) and computed on the dequantized weights, every other tensor as stored."""
    pytest.importorskip("comfy_kitchen")
    import json

    from comfy_kitchen.tensor.int8 import TensorWiseINT8Layout
    from safetensors.torch import save_file

    from nodes.models import comfy_quant

    config = {"format": "int8_tensorwise", "convrot": True, "convrot_groupsize": 16}
    marker = torch.tensor(list(json.dumps(config).encode()), dtype=torch.uint8)
    quantized = {}
    for key, value in load_file(models / FILES["transformer"]).items():
        if key.endswith(".weight") and value.ndim == 2 and value.shape[1] % 16 == 0:
            q, params = TensorWiseINT8Layout.quantize(
                value.float(), is_weight=True, per_channel=True, convrot=True, convrot_groupsize=16
            )
            layer = key[: -len("weight")]
            quantized |= {key: q, layer + "weight_scale": params.scale, layer + "comfy_quant": marker.clone()}
        else:
            quantized[key] = value
    path = tmp_path / "mage_flow_turbo_int8_convrot.safetensors"
    save_file(quantized, str(path))
    assert (probe(path).arch, probe(path).kind) == ("mage_flow", "diffusion_model")
    model = loader.load_diffusion_model(make_ref("diffusion_model", "mage_flow", [path]))
    expected = comfy_quant.dequantize(quantized, None, torch.float32)
    weights = model.module.state_dict()
    assert set(weights) == set(expected)
    for key, value in expected.items():
        assert torch.equal(weights[key], value.float()), key
    assert sum(k.endswith("comfy_quant") for k in quantized) == 34  # every linear layer


def test_loras_merge_under_qwen_images_names(tmp_path, models, dit):
    """ComfyUI's model_base.MageFlow is a QwenImage, so its LoRAs take Qwen-Image's key map: peft names under
    transformer. and kohya's lora_unet_ with alpha merge as W + strength * scale * up @ down; others stay."""
    from safetensors.torch import save_file

    from cluster.refs import Patch, file_digest

    gen = torch.Generator().manual_seed(9)
    base = {k: v.float() for k, v in load_file(models / FILES["transformer"]).items()}
    q, mlp = "transformer_blocks.0.attn.to_q.weight", "transformer_blocks.1.img_mlp.net.0.proj.weight"
    down_q, up_q = torch.randn(4, base[q].shape[1], generator=gen), torch.randn(base[q].shape[0], 4, generator=gen)
    down_m, up_m = torch.randn(4, base[mlp].shape[1], generator=gen), torch.randn(base[mlp].shape[0], 4, generator=gen)
    lora = {
        "transformer.transformer_blocks.0.attn.to_q.lora_A.weight": down_q,
        "transformer.transformer_blocks.0.attn.to_q.lora_B.weight": up_q,
        "lora_unet_transformer_blocks_1_img_mlp_net_0_proj.lora_down.weight": down_m,
        "lora_unet_transformer_blocks_1_img_mlp_net_0_proj.lora_up.weight": up_m,
        "lora_unet_transformer_blocks_1_img_mlp_net_0_proj.alpha": torch.tensor(2.0),
    }
    path = tmp_path / "mage_lora.safetensors"
    save_file(lora, str(path))
    ref = make_ref("diffusion_model", "mage_flow", [models / FILES["transformer"]])
    patched = loader.load_diffusion_model(ref.with_patch(Patch(str(path), file_digest(path), 0.7)))
    weights = patched.module.state_dict()
    assert torch.allclose(weights[q], base[q] + 0.7 * up_q @ down_q, atol=1e-5)
    assert torch.allclose(weights[mlp], base[mlp] + 0.7 * 0.5 * up_m @ down_m, atol=1e-5)
    unpatched = dit.module.state_dict()
    assert all(torch.equal(weights[k], unpatched[k]) for k in weights if k not in (q, mlp))
