"""The web UI's SDXL Revision template (workflows_json/sdxl_revision_text_prompts.json, written by
scripts/sdxl_revision_workflow.py: the template's node graph, sdxl-revision-tiny and clip-vision-g-tiny substituted,
example.png for both images, 128 pixels, 3 steps): CheckpointLoaderSimple, CLIPVisionLoader, two CLIPVisionEncode
feeding chained unCLIPConditioning on the text prompt, KSampler dpmpp_3m_sde_gpu, VAEDecode, SaveImage. From a
fresh, empty workspace (serve builds the demo files on its first start) the image is the same with the default
executors and with `--executors 0`, and the images change it (the same graph without unCLIPConditioning differs).
The model-level numbers are ComfyUI 0.3.64's (tests/models/test_unclip.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from scripts.sdxl_revision_workflow import tiny_template
from tests.e2e.served import serving
from tests.e2e.test_samplers_on_executors import render_on_server

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / "sdxl_revision_text_prompts"


def _without_images(prompt: dict) -> dict:
    """The prompt with KSampler's positive input taken from the text encoder, before unCLIPConditioning."""
    out = json.loads(json.dumps(prompt))
    sampler = next(n for n in out.values() if n["class_type"] == "KSampler")
    unclip = out[sampler["inputs"]["positive"][0]]
    while out[unclip["inputs"]["conditioning"][0]]["class_type"] == "unCLIPConditioning":
        unclip = out[unclip["inputs"]["conditioning"][0]]
    sampler["inputs"]["positive"] = unclip["inputs"]["conditioning"]
    return out


def _serve_and_render(workspace: Path, log_path: Path, prompts: dict[str, dict], *flags: str) -> dict:
    with serving(workspace, log_path, *flags) as base:
        return render_on_server(base, prompts, timeout_s=900)


def test_shipped_workflow_is_the_templates_graph() -> None:
    ui = json.loads(SHIPPED.with_suffix(".ui.json").read_text())
    assert ui == tiny_template()
    prompt = json.loads(SHIPPED.with_suffix(".json").read_text())
    assert sorted(n["class_type"] for n in prompt.values()).count("unCLIPConditioning") == 2


def test_template_renders_the_same_in_both_executor_modes(tmp_path) -> None:
    prompt = json.loads(SHIPPED.with_suffix(".json").read_text())
    workspace = tmp_path / "fresh"
    default = _serve_and_render(
        workspace, tmp_path / "default.log", {"revision": prompt, "text_only": _without_images(prompt)}
    )
    in_process = _serve_and_render(workspace, tmp_path / "executors0.log", {"revision": prompt}, "--executors", "0")
    image = default["revision"]
    assert image.shape == (128, 128, 3) and image.std() > 0
    assert np.array_equal(image, in_process["revision"]), (
        f"{int((image != in_process['revision']).sum())} values differ between the executor modes"
    )
    assert not np.array_equal(image, default["text_only"])
