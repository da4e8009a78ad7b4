"""scripts/templates_render.py's substitution: a template's model files become our tiny files of the same
family (a companion file such as the Flux VAE `ae.safetensors` by the family the prompt's other files name), and
a family without one is refused by name; sizes, steps and frames shrink, inputs become the workspace examples."""

from __future__ import annotations

import pytest

from scripts import templates_render


def test_a_companion_file_maps_by_the_family_the_other_files_name():
    assert templates_render.demo_file("ae.safetensors", ["z_image_turbo_bf16.safetensors"]) == (
        "z-image-turbo-tiny-ae.safetensors"
    )
    assert templates_render.demo_file("ae.safetensors", ["flux1-dev.safetensors"]) == "flux-tiny-ae.safetensors"
    assert templates_render.demo_file("ae.safetensors", ["ovis_image_bf16.safetensors"]) is None


def _ui(nodes: list[dict]) -> dict:
    for i, node in enumerate(nodes, 1):
        node.update(id=i, mode=0, inputs=[], outputs=[])
    return {"nodes": nodes, "links": []}


@pytest.fixture(scope="module")
def registry():
    from comfy_bridge.registry import build_registry

    return build_registry(None, load_custom_nodes=False)


def test_files_inputs_and_sizes_are_substituted(registry, tmp_path):
    ui = _ui(
        [
            {"type": "UNETLoader", "widgets_values": ["z_image_turbo_bf16.safetensors", "default"]},
            {"type": "LoadImage", "widgets_values": ["portrait.jpg", "image"]},
            {"type": "EmptySD3LatentImage", "widgets_values": [1024, 768, 4]},
            {"type": "LoraLoaderModelOnly", "widgets_values": ["some_style.safetensors", 1.0]},
        ]
    )
    prompt, tripwires = templates_render.tiny_prompt(ui, registry, tmp_path)
    assert prompt["1"]["inputs"]["unet_name"] == "z-image-turbo-tiny.safetensors"
    assert prompt["2"]["inputs"]["image"] == "example.png"
    assert prompt["3"]["inputs"] == {"width": 64, "height": 64, "batch_size": 1}
    # a LoRA of no tiny family: an unloadable file of its name, so only a branch that loads it fails
    assert tripwires == ["some_style.safetensors"]
    assert (tmp_path / "some_style.safetensors").read_bytes() == templates_render.TRIPWIRE


def test_a_model_of_a_family_without_a_tiny_file_is_refused_by_name(registry):
    ui = _ui([{"type": "UNETLoader", "widgets_values": ["anima-base-v1.0.safetensors", "default"]}])
    with pytest.raises(ValueError, match="no tiny file of this family for anima-base-v1.0.safetensors"):
        templates_render.tiny_prompt(ui, registry)
