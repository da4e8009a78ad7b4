"""scripts/templates_render.py: the HiDream templates' files map to hidream-tiny's (and Flux's tiny VAE), and its
files are not taken for another family's."""

from __future__ import annotations

from scripts import templates_render

TEXT = [
    "clip_l_hidream.safetensors",
    "clip_g_hidream.safetensors",
    "t5xxl_fp8_e4m3fn_scaled.safetensors",
    "llama_3.1_8b_instruct_fp8_scaled.safetensors",
    "ae.safetensors",
]
TINY = [
    "hidream_tiny_clip_l.safetensors",
    "hidream_tiny_clip_g.safetensors",
    "hidream_tiny_t5xxl.safetensors",
    "llama_3.1_8b_instruct_tiny.safetensors",
    "flux-tiny-ae.safetensors",
]


def test_hidream_files_map_to_hidream_tiny():
    for model in ("hidream_i1_dev_fp8.safetensors", "hidream_i1_full_fp8.safetensors", "hidream_e1_1_bf16.safetensors"):
        asked = [model, *TEXT]
        assert [templates_render.demo_file(n, asked) for n in asked] == ["hidream_i1_tiny.safetensors", *TINY]
    # HiDream's Llama is no other family's tiny file, and a Flux template's T5 stays Flux's
    assert templates_render.demo_file("llama_3.1_8b_instruct_fp8_scaled.safetensors", ["flux1-dev.safetensors"]) is None
    flux = ["flux1-dev.safetensors", "t5xxl_fp8_e4m3fn_scaled.safetensors"]
    assert templates_render.demo_file(flux[1], flux) == "flux-tiny-t5.safetensors"
