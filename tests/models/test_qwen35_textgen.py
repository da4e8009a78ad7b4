"""Generate Text on Qwen3.5 (FLUX 3's prompt upsampler, qwen3.5_9b_flux3_prompt_upsampler_w4a8.safetensors, CLIPLoader
type flux3), with an image.

The file's layout, recorded from its sources: the tensor names are transformers' Qwen3_5ForConditionalGeneration's
(`model.language_model.*`, `model.visual.*`, `lm_head.weight`), the names ComfyUI's comfy/sd.py reads a Qwen3.5 file
in (detect_te_model keys on `model.language_model.layers.0.linear_attn.A_log` and the input norm's width, then
maps `model.language_model.` / `model.visual.` / `lm_head.` onto its own module); a W4A8 layer is ComfyUI's
`asym_w4a8_int8` format (comfy/quant_ops.py QUANT_ALGOS: AsymW4A8Int8Layout, int8 storage) saved as
comfy-kitchen's AsymW4A8Int8Layout.state_dict_tensors names it: `weight`, `weight_s_rel`, `weight_s_channel`,
`weight_codebook` (and `weight_correction` for asymmetric layers), with the layer's `comfy_quant` JSON.

Reference: transformers' Qwen3_5ForConditionalGeneration.generate on the same (dequantized) weights, token ids and
pixels: the same greedy ids and the same logits for each step (within 1e-5)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from nodes.loaders import make_ref
from nodes.modelfns.text_generate import TextGenerateFn, TextGenerateParams
from nodes.models import qwen35_demo
from nodes.models.detect import probe
from nodes.models.qwen3vl_vision import preprocess
from nodes.models.qwen35_text import (
    IMAGE_PAD_ID,
    STOP_TOKENS,
    chat_text,
    dequantize,
    generate,
    prompt_ids,
)
from nodes.models.text_generate import Sampling

SYSTEM = "Expand the edit request."


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    return qwen35_demo.build_demo_qwen35(tmp_path_factory.mktemp("qwen35"))[0]


@pytest.fixture(scope="module")
def encoder(text_file):
    return TextGenerateFn().load_model(make_ref("text_encoder", "qwen35", [text_file], clip_type="flux3"))


@pytest.fixture(scope="module")
def image():
    gen = torch.Generator().manual_seed(0)
    return torch.rand(1, 40, 72, 3, generator=gen)


def test_the_demo_file_is_in_the_published_layout(text_file):
    sd = load_file(text_file)
    assert probe(text_file).arch == "qwen35"
    sidecars = ("weight_s_rel", "weight_s_channel", "weight_codebook", "weight_correction", "comfy_quant")
    names = {k for k in sd if not k.endswith(sidecars)}
    reference = set(qwen35_demo.tiny_model().state_dict())
    assert names == reference  # transformers' names, the head included (the 9B's is untied)
    quantized = [k[: -len(".comfy_quant")] for k in sd if k.endswith(".comfy_quant")]
    assert {f"{k}.weight" for k in quantized} == {k for k in reference if qwen35_demo.QUANTIZED.match(k)}
    assert any(".linear_attn.in_proj_a" in k for k in quantized) and any(".self_attn.q_proj" in k for k in quantized)
    for layer in quantized:
        n, k = reference_shape = qwen35_demo.tiny_model().state_dict()[layer + ".weight"].shape
        config = json.loads(bytes(sd[layer + ".comfy_quant"].tolist()))
        assert config == {"format": "asym_w4a8_int8", "group_size": 16, "convrot_groupsize": 16}, layer
        assert sd[layer + ".weight"].dtype == torch.int8 and sd[layer + ".weight"].shape == (n, k // 2)
        assert sd[layer + ".weight_s_rel"].dtype == torch.uint8 and sd[layer + ".weight_s_rel"].shape == (n, k // 16)
        assert sd[layer + ".weight_s_channel"].shape == (n,) and sd[layer + ".weight_codebook"].shape == (16,)
        assert reference_shape == (n, k)


def test_w4a8_dequantization_equals_comfy_kitchens(text_file):
    from comfy_kitchen.tensor import AsymW4A8Int8Layout, QuantizedTensor

    sd = load_file(text_file)
    ours = dequantize(sd, text_file, torch.float32)
    original = qwen35_demo.tiny_model().state_dict()
    layers = [k[: -len(".comfy_quant")] for k in sd if k.endswith(".comfy_quant")]
    assert layers
    for layer in layers:
        w = original[layer + ".weight"]
        params = AsymW4A8Int8Layout.Params(
            scale=sd[layer + ".weight_s_rel"].view(torch.float8_e4m3fn),
            s_channel=sd[layer + ".weight_s_channel"],
            codebook=sd[layer + ".weight_codebook"],
            orig_dtype=torch.float32,
            orig_shape=tuple(w.shape),
            group_size=16,
            convrot_groupsize=16,
        )
        kitchen = QuantizedTensor(sd[layer + ".weight"], "AsymW4A8Int8Layout", params).dequantize()
        assert torch.equal(ours[layer + ".weight"], kitchen), layer
        # and it is the float weight the file was made from, to 4-bit precision
        assert (kitchen - w).abs().max() < 0.25 * w.abs().max(), layer
    assert not any(k.endswith((".comfy_quant", "_s_rel", "_s_channel", "_codebook")) for k in ours)


def test_the_chat_text_is_comfyuis():
    assert chat_text("make it red", 0) == (
        "<|im_start|>user\nmake it red<|im_end|>\n<|im_start|>assistant\n<think>\n</think>\n"
    )
    assert chat_text("make it red", 2, "S", thinking=True) == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n"
        "<|vision_start|><|image_pad|><|vision_end|><|vision_start|><|image_pad|><|vision_end|>"
        "make it red<|im_end|>\n<|im_start|>assistant\n"
    )
    assert chat_text("<|im_start|>user\nx", 1) == "<|im_start|>user\nx"
    assert chat_text("x", 1, "S", template=False) == "x"
    # Qwen3.5's ids (its tokenizer, not Qwen2.5's): <|im_start|> 248045, <|image_pad|> 248056, </think> 248069
    ids = prompt_ids(chat_text("a", 1))
    assert ids[0] == 248045 and IMAGE_PAD_ID in ids and 248069 in ids


def _reference_model(text_file):
    from transformers import Qwen3_5ForConditionalGeneration

    model = Qwen3_5ForConditionalGeneration(qwen35_demo.config()).eval()
    model.load_state_dict(dequantize(load_file(text_file), text_file, torch.float32), strict=True)
    return model


def test_greedy_generation_with_an_image_equals_transformers(text_file, encoder, image):
    torch.set_num_threads(1)
    new = 10
    params = TextGenerateParams(
        prompt="make the dress red", max_length=new, system_prompt=SYSTEM, do_sample=False, media=["image"]
    )
    out = TextGenerateFn().execute(encoder, {"image": image}, params)
    ids = prompt_ids(chat_text("make the dress red", 1, SYSTEM))
    logits: list[torch.Tensor] = []
    ours = generate(encoder, ids, [image], new, Sampling(), logits_out=logits)
    assert out["ids"][0].tolist() == ours

    pixels, grid = preprocess(image)
    tokens = int(grid.prod()) // 4  # one per 2x2 patches
    pad = ids.index(IMAGE_PAD_ID)
    expanded = ids[:pad] + [IMAGE_PAD_ID] * tokens + ids[pad + 1 :]
    input_ids = torch.tensor([expanded])
    with torch.no_grad():
        expected = _reference_model(text_file).generate(
            input_ids=input_ids,
            pixel_values=pixels,
            image_grid_thw=grid,
            mm_token_type_ids=(input_ids == IMAGE_PAD_ID).int(),
            max_new_tokens=new,
            do_sample=False,
            eos_token_id=list(STOP_TOKENS),
            pad_token_id=STOP_TOKENS[0],
            output_logits=True,
            return_dict_in_generate=True,
        )
    assert ours == expected.sequences[0, len(expanded) :].tolist()
    assert len(logits) == len(expected.logits)
    for step, (a, b) in enumerate(zip(logits, expected.logits)):
        assert torch.allclose(a, b.float(), atol=1e-5, rtol=0), (step, (a - b).abs().max())


def test_the_image_is_read(encoder, image):
    """The picture's tokens reach the language model: another picture gives other logits."""
    ids = prompt_ids(chat_text("describe", 1))
    first: list[torch.Tensor] = []
    other: list[torch.Tensor] = []
    generate(encoder, ids, [image], 1, Sampling(), logits_out=first)
    generate(encoder, ids, [1 - image], 1, Sampling(), logits_out=other)
    assert not torch.allclose(first[0], other[0])


def test_video_and_audio_are_refused_by_name(encoder):
    params = TextGenerateParams(prompt="x", max_length=2, media=["image", "video"])
    with pytest.raises(ValueError, match="video: TextGenerate reads images only with Qwen3.5"):
        TextGenerateFn().execute(encoder, {}, params)


def test_the_templates_upsampler_file_becomes_the_tiny_one():
    from scripts import templates_render

    names = ["flux3-image-klein-base-int8-convrot.safetensors", "qwen3vl_4b_int8_convrot.safetensors"]
    assert templates_render.demo_file(qwen35_demo.FILE.split("/")[-1].replace("_tiny", ""), names) == (
        "qwen3.5_9b_flux3_prompt_upsampler_w4a8_tiny.safetensors"
    )
    assert (
        templates_render.demo_file("qwen3vl_4b_int8_convrot.safetensors", names) == "qwen3vl_4b_flux3_tiny.safetensors"
    )


@pytest.mark.parametrize("clip_type", ["flux3", "stable_diffusion"])
def test_clip_loader_reads_a_qwen35_file_whatever_the_type(text_file, tmp_path, clip_type):
    """As ComfyUI's load_text_encoder_state_dicts does (the template's CLIPLoader says flux3)."""
    import shutil

    from nodes.loaders import CLIPLoader
    from nodes.workspace import Workspace, activate

    ws = activate(Workspace(tmp_path / "ws").create())
    shutil.copy(text_file, ws.models_dir / "text_encoders" / text_file.name)
    (ref,) = CLIPLoader().load_clip(text_file.name, clip_type)
    assert ref.arch == "qwen35" and ref.option("clip_type") == clip_type


def test_the_9b_files_sizes_are_read_as_comfyuis_qwen35_9b():
    """ComfyUI's Qwen35Config with its qwen35_9b overrides (comfy/text_encoders/qwen35.py): width 4096, MLP
    12288, 32 layers (every fourth full attention), 16 query / 4 key-value heads of 256, DeltaNet 16 key and 32
    value heads of 128, conv kernel 4; its tower 1152 wide, MLP 4304, 27 blocks, 16 heads."""
    from nodes.models.qwen35_text import text_config, vision_config

    def e(*shape):
        return torch.empty(shape, device="meta")

    sd = {"embed_tokens.weight": e(248320, 4096)}
    for i in range(32):
        sd[f"layers.{i}.mlp.gate_proj.weight"] = e(12288, 4096)
        if (i + 1) % 4:
            sd[f"layers.{i}.linear_attn.A_log"] = e(32)
            sd[f"layers.{i}.linear_attn.norm.weight"] = e(128)
            sd[f"layers.{i}.linear_attn.in_proj_qkv.weight"] = e(2 * 16 * 128 + 32 * 128, 4096)
            sd[f"layers.{i}.linear_attn.conv1d.weight"] = e(2 * 16 * 128 + 32 * 128, 1, 4)
        else:
            sd[f"layers.{i}.self_attn.q_norm.weight"] = e(256)
            sd[f"layers.{i}.self_attn.q_proj.weight"] = e(2 * 16 * 256, 4096)
            sd[f"layers.{i}.self_attn.k_proj.weight"] = e(4 * 256, 4096)
    cfg = text_config(sd)
    assert cfg["layer_types"] == (["linear_attention"] * 3 + ["full_attention"]) * 8
    expected = {"hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 32, "head_dim": 256}
    expected |= {"num_attention_heads": 16, "num_key_value_heads": 4, "linear_num_key_heads": 16}
    expected |= {"linear_key_head_dim": 128, "linear_num_value_heads": 32, "linear_value_head_dim": 128}
    assert {k: cfg[k] for k in expected} == expected and cfg["linear_conv_kernel_dim"] == 4
    vis = {
        "patch_embed.proj.weight": e(1152, 3, 2, 16, 16),
        "blocks.0.mlp.linear_fc1.weight": e(4304, 1152),
        "merger.linear_fc2.weight": e(4096, 4 * 1152),
        "pos_embed.weight": e(2304, 1152),
    } | {f"blocks.{i}.norm1.weight": e(1152) for i in range(27)}
    v = vision_config(vis)
    assert (v["hidden_size"], v["intermediate_size"], v["depth"], v["num_heads"]) == (1152, 4304, 27, 16)
    assert (v["out_hidden_size"], v["num_position_embeddings"], v["patch_size"]) == (4096, 2304, 16)
