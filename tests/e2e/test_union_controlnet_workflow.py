"""SDXL with a union ControlNet through the cluster (workflows_json/union_controlnet_sdxl.json, written by
scripts/union_controlnet_workflow.py): from a fresh, empty workspace (serve builds the demo files on its first start)
the image is the same with the default executors and with `--executors 0`, and the ControlNet changes it. ComfyUI's
numbers for the same ControlNet are checked in-process (tests/nodes/test_union_controlnet.py: residuals and sampled
latents); its image is not compared here, as ComfyUI cannot run sdxl-tiny's byte-level text encoders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from scripts.union_controlnet_workflow import api
from tests.e2e.served import render_in_both_modes, render_with_serve

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / "union_controlnet_sdxl.json"


def test_shipped_workflow_is_the_scripts() -> None:
    assert json.loads(SHIPPED.read_text()) == api()


def test_workflow_in_both_executor_modes(tmp_path) -> None:
    prompt = json.loads(SHIPPED.read_text())
    image = render_in_both_modes(tmp_path, prompt)
    assert image.shape == (96, 128, 3) and image.std() > 0
    without = {k: v for k, v in prompt.items() if k not in ("6", "7", "8")}
    without["10"] = {**prompt["10"], "inputs": {**prompt["10"]["inputs"], "positive": ["3", 0], "negative": ["4", 0]}}
    plain = render_with_serve(tmp_path / "fresh", tmp_path / "plain.log", without, "--executors", "0")
    assert not np.array_equal(image, plain)
