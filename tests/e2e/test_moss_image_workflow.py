"""The web UI's MOSS-Image text-to-image template (image_moss_image_t2i, the SFT model; the Base model's template is
the same graph with another file name, which maps to the same tiny file) as scripts/templates_render.py runs it:
the template's own graph with its subgraph unpacked, converted by our UI converter, the tiny MOSS-Image
transformer, the tiny Qwen3.5 (text encoder with CLIPLoader type moss_image, and the prompt enhancer, which the
t2i template has on) and FLUX.2's tiny VAE in place of the downloads, sizes and steps shrunk. Through serve from a
fresh, empty workspace (its first start builds the demo files) the saved image is the same with the default
executors and with `--executors 0`: TextGenerate, CLIPTextEncode, KSampler with the template's
SkipLayerGuidanceDiTSimple (block 22 skipped in the negative prediction), VAEDecode."""

from __future__ import annotations

import json

import pytest

from scripts import templates_coverage
from scripts.templates_render import tiny_prompt
from tests.e2e.served import render_in_both_modes


def template_prompt(name: str, workspace) -> dict:
    from comfy_bridge.registry import build_registry
    from nodes.workspace import Workspace

    workflow = json.loads((templates_coverage.templates_dir() / f"{name}.json").read_text())
    prompt, tripwires = tiny_prompt(workflow, build_registry(Workspace(workspace)))
    assert not tripwires
    return prompt


# Two server starts, the first building every demo file, and the prompt enhancer's generation: past the default
# 600 s on a loaded 2-core machine (measured: 11 min at load 17).
@pytest.mark.timeout(1800)
def test_template_renders_the_same_in_both_executor_modes(tmp_path) -> None:
    prompt = template_prompt("image_moss_image_t2i", tmp_path / "registry")
    classes = {n["class_type"] for n in prompt.values()}
    assert {"UNETLoader", "TextGenerate", "SkipLayerGuidanceDiTSimple", "KSampler", "SaveImage"} <= classes
    (loader,) = [n["inputs"] for n in prompt.values() if n["class_type"] == "CLIPLoader"]
    assert (loader["clip_name"], loader["type"]) == (
        "qwen3.5_9b_flux3_prompt_upsampler_w4a8_tiny.safetensors",
        "moss_image",
    )
    default = render_in_both_modes(tmp_path, prompt)
    assert default.shape == (640, 640, 3) and default.std() > 0  # the template's 1:1 selector, shrunk
