"""What a run writes: every shipped workflow's images (PNG) and videos (MP4) carry ComfyUI's metadata, the prompt
and, for a UI-format file, its workflow. assert_outputs_carry_the_prompt is applied to every shipped workflow's
in-process run in test_cluster_serve_matches_in_process.py (which renders each API file anyway); here one UI file
runs, whose images must hold the UI workflow beside the prompt (each UI file converts to its API file's prompt:
test_ui_format_matches_api.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import av
import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[2]

UI_FILE_RUN = "controlnet.ui.json"


def _same(stored: dict, prompt: dict) -> bool:
    """The stored prompt is the run's, compared as JSON: a loop node's is_changed is NaN (always run again),
    which equals nothing in Python, itself included."""
    return json.dumps(stored, sort_keys=True) == json.dumps(prompt, sort_keys=True)


def test_a_ui_file_runs_with_its_workflow_stored(demo_workspace):
    from comfy_bridge.cli.run import load_prompt, run_prompt
    from comfy_bridge.registry import build_registry

    registry = build_registry(demo_workspace)
    prompt, workflow = load_prompt(json.loads((REPO / "workflows_json" / UI_FILE_RUN).read_text()), registry)
    assert workflow is not None
    files = asyncio.run(run_prompt(prompt, workflow, registry, show_progress=False))
    assert_outputs_carry_the_prompt(files, prompt, workflow, demo_workspace.temp_dir)


def assert_outputs_carry_the_prompt(files: list[Path], prompt: dict, workflow: dict | None, temp_dir: Path) -> None:
    """The files a run wrote: at least one; each PNG holds the prompt (and the UI workflow, if given) and each MP4
    the prompt in its tags; what the workflow saves (outside the temp folder) is not flat."""
    assert files, "the workflow wrote no image"
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
            if "prompt" not in im.text and temp_dir in f.resolve().parents:
                unlabelled += 1
                assert unlabelled <= painters, f"{f.name}: a preview without the prompt"
                continue
            assert _same(json.loads(im.text["prompt"]), prompt)
            if workflow is not None:
                assert json.loads(im.text["workflow"]) == workflow
            extrema = im.convert("L").getextrema()
        # a preview (temp folder) shows an intermediate as it is: a Canny map of the smooth example picture, or the
        # mask LoadImage gives a picture without alpha, is legitimately empty; what a workflow saves is not
        if temp_dir not in f.resolve().parents:
            assert extrema[0] != extrema[1], f"{f.name} is a flat image"
