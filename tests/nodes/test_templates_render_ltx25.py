"""scripts/templates_render.py on the LTX-2.5 templates: the video VAE, the Gemma 4 text encoder with its
projection and the Gemma 4 E2B prompt enhancer become LTX-2.5's tiny files (nodes/models/ltx25_demo.py, written by
demo-models), and what has no tiny file yet is named: the audio VAE file and the 2.5 latent upscaler."""

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


@pytest.mark.parametrize("name", ["video_ltx2_5_i2v", "video_ltx2_5_t2v"])
def test_the_templates_name_only_the_files_still_without_a_tiny_one(registry, name: str) -> None:
    workflow = json.loads((templates_coverage.templates_dir() / f"{name}.json").read_text())
    with pytest.raises(ValueError, match="no tiny file of this family") as info:
        templates_render.tiny_prompt(workflow, registry)
    unmade = str(info.value)
    for still in ("ltx-2.5-audio-vae", "ltx-2.5-latent-spatial-upscaler"):
        assert still in unmade
    for made in ("ltx-2.5-video-vae", "gemma4-12b-with-proj", "gemma4_e2b_it"):
        assert made not in unmade
