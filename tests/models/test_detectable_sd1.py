"""build_detectable_sd1's checkpoint is one ComfyUI's own model detection takes for SD1.5 (the rules recorded in
tests/models/fixtures/comfyui_sd_unet_rules.json from ComfyUI's model_detection.py / supported_models.py), where
sd1-tiny is not; its text encoder and VAE are the published full sizes, which ComfyUI builds whatever the file
says; and our own loader reads it as SD1 too. The packs harness runs its model cases on it on both sides."""

from __future__ import annotations

import torch
from diffusers import UNet2DConditionModel

from nodes.models import unet as unet_mod
from nodes.models import vae as vae_mod
from nodes.models.demo import _sd1_layout, _unet, _unet_ldm, detectable_sd1_layout
from nodes.models.detect import classify
from tests.models.test_sd2 import RULES, comfy_features

SD15 = {k: v for k, v in RULES["families"]["sd1"].items() if k not in ("class", "transformer_depth")}


def shapes(layout: dict[str, torch.Tensor]) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in layout.items()}


def test_comfyuis_rules_take_it_for_sd15_and_not_sd1_tiny():
    detectable = shapes(detectable_sd1_layout())
    assert {k: comfy_features(detectable)[k] for k in SD15} == SD15
    torch.manual_seed(0)
    tiny = {unet_mod.LDM_UNET_PREFIX + k: tuple(v.shape) for k, v in _unet_ldm(_unet("sd1")).items()}
    assert {k: comfy_features(tiny)[k] for k in SD15} != SD15  # why it exists: 32 wide, context 32


def test_text_encoder_and_vae_are_the_published_sizes():
    with torch.device("meta"):
        released = shapes(_sd1_layout(UNet2DConditionModel(cross_attention_dim=768)))
    detectable = shapes(detectable_sd1_layout())
    not_unet = [k for k in released if not k.startswith(unet_mod.LDM_UNET_PREFIX)]
    assert not_unet and {k: detectable.get(k) for k in not_unet} == {k: released[k] for k in not_unet}
    te = "cond_stage_model.transformer.text_model."
    assert detectable[te + "embeddings.token_embedding.weight"] == (49408, 768)
    assert sum(k.startswith(te + "encoder.layers.") and k.endswith("fc1.weight") for k in detectable) == 12
    assert detectable[vae_mod.LDM_VAE_PREFIX + "decoder.conv_in.weight"] == (512, 4, 3, 3)


def test_our_loader_reads_it_as_sd1():
    info = classify(shapes(detectable_sd1_layout()), "sd1-detectable.safetensors")
    assert info.arch == "sd1"
