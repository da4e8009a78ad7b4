"""scripts/templates_render.py on the LTX-2.5 templates: the video VAE, the Gemma 4 text encoder with its
projection and the Gemma 4 E2B prompt enhancer become LTX-2.5's tiny files (nodes/models/ltx25_demo.py, written by
demo-models), and every model file the templates ask for now has a tiny one (the transformer, the audio VAE file and
the latent upscaler too, tests/nodes/test_templates_render.py)."""

from __future__ import annotations

import json

import pytest

from nodes.models import ltx25_demo
from scripts import templates_coverage, templates_render

ASKED = ["ltx-2.5-22b-distilled-transformer-comfy-int8-convrot.safetensors"]


def test_ltx25_files_map_to_their_tiny_files() -> None:
    vae, te = "ltx-2.5-video-vae-bf16.safetensors", "gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors"
    assert templates_render.demo_file(vae, ASKED + [vae]) == ltx25_demo.VAE_FILE.split("/")[-1]
    assert templates_render.demo_file(te, ASKED + [te]) == ltx25_demo.TEXT_FILE.split("/")[-1]
    assert templates_render.demo_file(te, ["flux1-dev.safetensors", te]) is None  # only beside LTX-2.5's files
    enhancer = "gemma4_e2b_it_int8_convrot.safetensors"
    assert templates_render.demo_file(enhancer, ASKED + [enhancer]) == ltx25_demo.ENHANCER_FILE.split("/")[-1]


@pytest.fixture(scope="module")
def registry():
    from comfy_bridge.registry import build_registry

    return build_registry(None, load_custom_nodes=False)


@pytest.mark.parametrize("name", ["video_ltx2_5_i2v", "video_ltx2_5_t2v", "video_ltx2_5_flf2v"])
def test_every_file_the_templates_ask_for_has_a_tiny_one(registry, name: str, tmp_path) -> None:
    workflow = json.loads((templates_coverage.templates_dir() / f"{name}.json").read_text())
    prompt, tripwires = templates_render.tiny_prompt(workflow, registry, tmp_path)
    files = {
        v
        for node in prompt.values()
        for v in node["inputs"].values()
        if isinstance(v, str) and templates_render.MODEL_FILE.search(v)
    }
    assert not tripwires and files
    assert all("_tiny." in f for f in files), sorted(files)  # each the tiny file of its family
    assert ltx25_demo.VAE_FILE.split("/")[-1] in files and "ltx-2.5-audio-vae_tiny.safetensors" in files
