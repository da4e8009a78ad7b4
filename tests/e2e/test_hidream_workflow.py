"""The web UI's HiDream templates on hidream-tiny (workflows_json/hidream_i1_dev.json and hidream_e1_1.json, written
by scripts/hidream_workflow.py: the templates' own graphs, the tiny files substituted, 2 steps, tiny sizes).

- I1 Dev: QuadrupleCLIPLoader -> CLIPTextEncode (both prompts), UNETLoader -> ModelSamplingSD3 (shift 6) ->
  KSampler lcm, EmptySD3LatentImage, VAEDecode, SaveImage.
- E1.1: LoadImage -> ImageScaleToTotalPixels -> InstructPixToPixConditioning (the edit image's latent beside both
  prompts), UNETLoader -> CFGNorm, DualCFGGuider (the template guides with the plain positive prompt as its
  negative: an entry without the edit image), SamplerCustomAdvanced.

Each renders the same image with the default executor and with `--executors 0`, and that image equals upstream
ComfyUI 0.10.0's of the same workflow on the same files within 1/255 (run node by node with its node classes by
scripts/record_comfyui_hidream.py, its Llama 3 tokenizer the same BPE as ours). 0.10.0, not 0.3.64: our samplers
draw their per-step noise as ComfyUI does since 0.10.0, and I1 Dev samples with lcm, which re-noises each step."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from scripts.hidream_workflow import TEMPLATES, tiny_template
from tests.e2e.test_context_windows_served import _images
from tests.e2e.test_qwen_image_workflow import comfyui_images
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_hidream.json.xz")["workflows"]


def shipped(name: str) -> dict:
    return json.loads((REPO / "workflows_json" / f"{name}.json").read_text())


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_shipped_workflows_are_the_templates_graph(name: str) -> None:
    ui = json.loads((REPO / "workflows_json" / f"{name}.ui.json").read_text())
    assert ui == tiny_template(TEMPLATES[name])
    assert RECORDED[name]["prompt"] == shipped(name)  # what ComfyUI ran is what we ship


@pytest.fixture(scope="module")
def servers(serve):
    # both compute with one torch thread: results differ between thread counts
    return {
        "default": serve("--executor-threads", "1"),
        "in-process": serve("--executors", "0", "--executor-threads", "1"),
    }


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_template_in_both_executor_modes_equals_comfyuis(servers, name: str) -> None:
    images = {mode: _images(base, shipped(name)) for mode, base in servers.items()}
    default = images["default"]
    assert default.ndim == 4 and default.shape[-1] == 3 and default.std() > 0
    assert np.array_equal(default, images["in-process"]), (
        f"{int((default != images['in-process']).sum())} values differ between the executor modes"
    )
    theirs = np.stack(comfyui_images(RECORDED[name]))
    assert default.shape == theirs.shape
    diff = np.abs(default.astype(int) - theirs.astype(int))
    assert diff.max() <= 1, f"{int((diff > 1).sum())} values differ from ComfyUI's image by more than 1/255"


def test_edit_image_entries_are_not_batched_with_plain_ones(demo_workspace, monkeypatch) -> None:
    """E1.1's guider evaluates two entries with the edit image and one without at each step: the one without must
    run without it (ComfyUI cannot concat such conds), so batching the entries gives each one's own prediction."""
    from cluster.local import set_threads
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry
    from nodes.modelfns import denoise

    set_threads(1)
    registry = build_registry(demo_workspace)

    def render() -> np.ndarray:
        (path,) = asyncio.run(run_prompt(shipped("hidream_e1_1"), None, registry, show_progress=False))
        return np.asarray(Image.open(path))

    batched = render()
    plain_shape = denoise._shape
    monkeypatch.setattr(denoise, "_shape", lambda t: (object(), plain_shape(t)))  # every entry a pass of its own
    alone = render()
    assert np.array_equal(batched, alone)
