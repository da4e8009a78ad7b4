"""scripts/templates_render.py: step counts fed through primitives titled "Steps" shrink as a KSampler's own
`steps` does (Qwen-Image-Edit 2511's template feeds 40, or 4 with its Lightning LoRA, that way; unshrunk, one
render took 25 minutes on a loaded CPU), and Anima's files map to anima-tiny's."""

from __future__ import annotations

from scripts import templates_render
from tests.nodes.test_templates_render import _ui, registry  # noqa: F401 (a fixture)


def test_primitives_titled_steps_shrink(registry, tmp_path):  # noqa: F811
    ui = _ui(
        [
            {"type": "PrimitiveInt", "title": "Steps", "widgets_values": [40, "fixed"]},
            {"type": "PrimitiveInt", "title": "Steps", "widgets_values": [1, "fixed"]},
            {"type": "PrimitiveInt", "title": "Seed", "widgets_values": [40, "fixed"]},
        ]
    )
    prompt, _ = templates_render.tiny_prompt(ui, registry, tmp_path)
    assert [prompt[str(i)]["inputs"]["value"] for i in range(1, 4)] == [2, 1, 40]


def test_anima_files_map_to_anima_tiny():
    for model in ("anima-base-v1.0.safetensors", "anima-preview3-base.safetensors"):
        asked = [model, "qwen_3_06b_base.safetensors", "qwen_image_vae.safetensors"]
        assert [templates_render.demo_file(n, asked) for n in asked] == [
            "anima_tiny.safetensors",
            "qwen_3_06b_base_tiny.safetensors",
            "qwen_image_vae_tiny.safetensors",
        ]
    # Anima's text encoder file is not a Z-Image or Klein Qwen3 4B's tiny file elsewhere
    assert templates_render.demo_file("qwen_3_06b_base.safetensors", ["z_image_turbo_bf16.safetensors"]) is None
