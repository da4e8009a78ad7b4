"""The web UI's Krea 2 Turbo style-reference template (image_krea2_turbo_int8_image_style_reference of the installed
templates package), as scripts/templates_render.py runs it (its subgraph unpacked, demo-models' tiny krea2 transformer,
Qwen3-VL, style-reference LoRA and qwen-image-tiny's VAE in place of the downloads, the workspace's example.png as
the reference picture, 0.1 megapixels, 2 steps): UNETLoader -> LoraLoaderModelOnly -> ModelSamplingFlux; CLIPLoader
krea2 -> TextEncodeQwenImageEditPlus (the picture read by the Qwen3-VL vision tower and VAE-encoded as a reference
latent) -> FluxKontextMultiReferenceLatentMethod index_timestep_zero, ConditioningZeroOut as the negative; CFGGuider,
SamplerCustomAdvanced euler/simple, VAEDecode, SaveImage. From a fresh, empty workspace the image is the same with
the default executors and with `--executors 0`. The pieces are checked against ComfyUI's Krea 2 code in
tests/models/test_krea2_reference.py."""

from __future__ import annotations

import json

from scripts.templates_coverage import templates_dir
from tests.e2e.served import render_in_both_modes

TEMPLATE = "image_krea2_turbo_int8_image_style_reference"


def _prompt() -> dict:
    from comfy_bridge.registry import build_registry
    from scripts.templates_render import tiny_prompt

    workflow = json.loads((templates_dir() / f"{TEMPLATE}.json").read_text())
    prompt, tripwires = tiny_prompt(workflow, build_registry(None))
    assert tripwires == []  # every model file, the LoRA included, has a tiny file of its family
    return prompt


def test_style_reference_template_in_both_executor_modes(tmp_path) -> None:
    prompt = _prompt()
    by_class = {n["class_type"]: n for n in prompt.values()}
    assert by_class["CLIPLoader"]["inputs"]["type"] == "krea2"
    assert by_class["LoraLoaderModelOnly"]["inputs"]["lora_name"] == "krea2_style_reference_tiny.safetensors"
    assert by_class["FluxKontextMultiReferenceLatentMethod"]["inputs"]["reference_latents_method"] == (
        "index_timestep_zero"
    )
    assert by_class["TextEncodeQwenImageEditPlus"]["inputs"]["image1"][0] in prompt  # the picture is wired in
    image = render_in_both_modes(tmp_path, prompt)
    assert image.shape == (320, 320, 3) and image.std() > 0
