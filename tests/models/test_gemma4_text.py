"""Gemma 4's language model read from ComfyUI's key layout (nodes/models/gemma4_text.py): the configuration ComfyUI's
Gemma4_E2B_Config / Gemma4_12B_Config give (written out here at tiny sizes) is recovered from the shapes alone,
int8 ConvRot layers included, and the loaded network's hidden states are transformers' Gemma 4 on those weights."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import Gemma4TextConfig
from transformers.models.gemma4.modeling_gemma4 import Gemma4TextModel

from nodes.models import comfy_quant, gemma4_text
from nodes.models.errors import ModelLoadError

ROPE = {
    "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
    "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0},
}
# ComfyUI's Gemma4_E2B_Config at tiny sizes: sliding windows of 512 on four layers of five, per-layer inputs,
# the last layers KV-shared with double-wide MLPs, one K/V head.
E2B = dict(
    vocab_size=320,
    hidden_size=64,
    intermediate_size=64,
    num_hidden_layers=10,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=16,
    global_head_dim=32,
    layer_types=(["sliding_attention"] * 4 + ["full_attention"]) * 2,
    sliding_window=512,
    hidden_size_per_layer_input=16,
    vocab_size_per_layer_input=320,
    num_kv_shared_layers=4,
    use_double_wide_mlp=True,
)
# ComfyUI's Gemma4_12B_Config at tiny sizes: five sliding layers (1024) of six, global layers with one K head
# reused as V (no v_proj), no per-layer inputs.
G12B = dict(
    vocab_size=320,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=6,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    global_head_dim=32,
    num_global_key_value_heads=1,
    attention_k_eq_v=True,
    layer_types=["sliding_attention"] * 5 + ["full_attention"],
    sliding_window=1024,
    hidden_size_per_layer_input=0,
    num_kv_shared_layers=0,
)


def reference(sizes: dict, seed: int) -> Gemma4TextModel:
    torch.manual_seed(seed)
    config = Gemma4TextConfig(**sizes, rope_parameters=ROPE, rms_norm_eps=1e-6, use_cache=False)
    model = Gemma4TextModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(1 + 0.1 * torch.randn_like(p) if name.endswith("norm.weight") else 0.1 * torch.randn_like(p))
        for layer in model.layers:
            layer.layer_scalar.uniform_(0.3, 1.0)
    return model


def quantized(weight: torch.Tensor, group: int = 16) -> dict[str, torch.Tensor]:
    from comfy_kitchen.tensor.int8 import TensorWiseINT8Layout

    q, params = TensorWiseINT8Layout.quantize(
        weight, is_weight=True, per_channel=True, convrot=True, convrot_groupsize=group
    )
    config = {"format": "int8_tensorwise", "convrot": True, "convrot_groupsize": group}
    marker = torch.tensor(list(json.dumps(config).encode("utf-8")), dtype=torch.uint8)
    return {"weight": q, "weight_scale": params.scale, "comfy_quant": marker}


def comfyui_file(model: Gemma4TextModel, prefix: str = "model.", quantize: bool = False) -> dict[str, torch.Tensor]:
    """The model's tensors as ComfyUI's Gemma4Transformer names them, its KV-shared layers' unused K/V kept."""
    sd = {prefix + k: v.detach().clone() for k, v in model.state_dict().items()}
    config = model.config
    first_shared = config.num_hidden_layers - config.num_kv_shared_layers
    for i in range(first_shared, config.num_hidden_layers):
        attn = f"{prefix}layers.{i}.self_attn."
        width = sd[attn + "q_norm.weight"].shape[0]
        sd[attn + "k_proj.weight"] = torch.randn(config.num_key_value_heads * width, config.hidden_size)
        sd[attn + "v_proj.weight"] = torch.randn(config.num_key_value_heads * width, config.hidden_size)
        sd[attn + "k_norm.weight"] = torch.ones(width)
    if quantize:
        for key in [k for k in sd if k.endswith(("_proj.weight",)) and sd[k].shape[-1] % 16 == 0]:
            layer = key[: -len("weight")]
            sd.update({layer + name: t for name, t in quantized(sd.pop(key)).items()})
    return sd


def hidden_states(model: torch.nn.Module, ids: torch.Tensor) -> list[torch.Tensor]:
    with torch.no_grad():
        return list(model(input_ids=ids, output_hidden_states=True).hidden_states)


@pytest.mark.parametrize(("sizes", "prefix"), [(E2B, "model."), (E2B, "model.language_model."), (G12B, "model.")])
def test_comfyui_layout_loads_as_the_configured_gemma4(sizes: dict, prefix: str) -> None:
    torch.set_num_threads(1)
    ref = reference(sizes, seed=3)
    sd = comfyui_file(ref, prefix)
    sd["text_embedding_projection.video_aggregate_embed.weight"] = torch.zeros(4, 4)  # LTX-2.5's, not Gemma's
    ours = gemma4_text.load_language_model(sd)
    for key in ("layer_types", "sliding_window", "num_kv_shared_layers", "attention_k_eq_v"):
        assert getattr(ours.config, key) == getattr(ref.config, key), key
    assert [layer.self_attn.head_dim for layer in ours.layers] == [layer.self_attn.head_dim for layer in ref.layers]
    assert ours.config.hidden_size_per_layer_input == sizes["hidden_size_per_layer_input"]
    ids = torch.tensor([[2, 17, 301, 5, 99, 42, 7, 260]])
    for got, want in zip(hidden_states(ours, ids), hidden_states(ref, ids), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


@pytest.mark.parametrize("sizes", [E2B, G12B])
def test_int8_convrot_file_is_the_model_of_its_dequantized_weights(sizes: dict) -> None:
    pytest.importorskip("comfy_kitchen")
    torch.set_num_threads(1)
    ref = reference(sizes, seed=4)
    sd = comfyui_file(ref, quantize=True)
    assert comfy_quant.is_quantized(sd)
    ours = gemma4_text.load_language_model(sd)
    dequantized = comfy_quant.dequantize(gemma4_text.strip_prefix(sd, "model."), None, torch.float32)
    expected = reference(sizes, seed=4)
    expected.load_state_dict({k: v for k, v in dequantized.items() if k in expected.state_dict()})
    ids = torch.tensor([[2, 11, 12, 13, 300]])
    for got, want in zip(hidden_states(ours, ids), hidden_states(expected, ids), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    # the int8 weights are the float ones to within their rounding
    assert (hidden_states(ours, ids)[-1] - hidden_states(ref, ids)[-1]).abs().max() < 0.5


def test_files_without_gemma4_are_refused_by_name() -> None:
    with pytest.raises(ModelLoadError, match="no Gemma 4 language model") as info:
        gemma4_text.load_language_model(
            {"model.layers.0.self_attn.q_proj.weight": torch.zeros(4, 4)}, "/m/g.safetensors"
        )
    assert "/m/g.safetensors" in str(info.value)
    ref = comfyui_file(reference(G12B, seed=5))
    for key in [k for k in ref if ".q_norm." in k]:
        ref[key] = torch.ones(16)  # every layer as wide: no global layer to place
    with pytest.raises(ModelLoadError, match="not a Gemma 4 language model layout"):
        gemma4_text.load_language_model(ref, "/m/g.safetensors")
