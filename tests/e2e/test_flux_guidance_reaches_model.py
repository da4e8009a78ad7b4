"""FluxGuidance's value is what the guidance-distilled Flux model is conditioned on."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[2]


def _image(ws, guidance: float) -> np.ndarray:
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    prompt = json.loads((REPO / "workflows_json" / "flux.json").read_text())
    prompt["13"]["inputs"]["guidance"] = guidance
    prompt["3"]["inputs"]["steps"] = 2
    (path,) = asyncio.run(run_prompt(prompt, None, build_registry(ws), show_progress=False))
    return np.asarray(Image.open(path))


def test_guidance_changes_the_flux_image(demo_workspace, fixed_threads):
    assert not np.array_equal(_image(demo_workspace, 1.0), _image(demo_workspace, 6.0))
    assert np.array_equal(_image(demo_workspace, 3.5), _image(demo_workspace, 3.5))
