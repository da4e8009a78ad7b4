"""Every shipped workflow runs end to end on the demo models and writes a PNG (or, for a video workflow, an
MP4) with ComfyUI's metadata. The API file of each is run; its UI file converts to the same prompt
(test_ui_format_matches_api.py), so running it too would compute the same images again: one UI file runs, to
show that a UI-format file is executed with its workflow stored beside the prompt."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import av
import numpy as np
import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[2]

UI_FILE_RUN = "controlnet.ui.json"
WORKFLOWS = [
    *sorted(p.name for p in (REPO / "workflows_json").glob("*.json") if not p.name.endswith(".ui.json")),
    UI_FILE_RUN,
]


def _same(stored: dict, prompt: dict) -> bool:
    """The stored prompt is the run's, compared as JSON: a loop node's is_changed is NaN (always run again),
    which equals nothing in Python, itself included."""
    return json.dumps(stored, sort_keys=True) == json.dumps(prompt, sort_keys=True)


@pytest.mark.parametrize("name", WORKFLOWS)
def test_workflow_writes_png_with_prompt_metadata(demo_workspace, name):
    from comfy_bridge.cli.run import load_prompt, run_prompt
    from comfy_bridge.registry import build_registry

    registry = build_registry(demo_workspace)
    prompt, workflow = load_prompt(json.loads((REPO / "workflows_json" / name).read_text()), registry)
    files = asyncio.run(run_prompt(prompt, workflow, registry, show_progress=False))
    assert files, f"{name} wrote no image"
    # a Painter previews what it painted without the prompt: ComfyUI's takes no hidden PROMPT (not an output node)
    unlabelled, painters = 0, sum(node["class_type"] == "Painter" for node in prompt.values())
    for f in files:
        if f.suffix == ".mp4":  # SaveVideo: the prompt in the container's tags, frames decoded
            with av.open(str(f)) as container:
                assert _same(json.loads(container.metadata["prompt"]), prompt)
                frames = np.stack([frame.to_ndarray(format="gray") for frame in container.decode(video=0)])
            assert frames.min() != frames.max(), f"{f.name} is a flat video"
            continue
        with Image.open(f) as im:
            assert im.format == "PNG"
            if "prompt" not in im.text and demo_workspace.temp_dir in f.resolve().parents:
                unlabelled += 1
                assert unlabelled <= painters, f"{f.name}: a preview without the prompt"
                continue
            assert _same(json.loads(im.text["prompt"]), prompt)
            if workflow is not None:
                assert json.loads(im.text["workflow"]) == workflow
            extrema = im.convert("L").getextrema()
        # a preview (temp folder) shows an intermediate as it is: a Canny map of the smooth example picture, or the
        # mask LoadImage gives a picture without alpha, is legitimately empty; what a workflow saves is not
        if demo_workspace.temp_dir not in f.resolve().parents:
            assert extrema[0] != extrema[1], f"{f.name} is a flat image"
