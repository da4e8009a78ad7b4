"""The web UI's two LTX-Video 0.9 templates (workflows_json/ltxv_image_to_video.json and ltxv_text_to_video.json,
written by scripts/ltxv_workflow.py: the templates' graphs with ltxv-tiny's checkpoint, the tiny T5 with CLIPLoader
type ltxv, example.png, a fixed seed, 96 x 64 pixels, 9 frames, 3 steps) from a fresh, empty workspace: the frames
(a SaveImage of VAEDecode beside the templates' CreateVideo and SaveVideo) are the same with the default executors
and with `--executors 0`, and within 1/255 of ComfyUI 0.3.64's on the same files and graph
(tests/models/fixtures/comfyui_ltxv_workflows.json.xz, recorded by scripts/record_comfyui_ltxv_workflows.py)."""

from __future__ import annotations

import io
import json
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from scripts.ltxv_workflow import TEMPLATES
from scripts.workflow_files import tiny_template_ui
from tests.e2e.served import REPO, assert_within_1_of_255_of_record, serving
from tests.recorded_tensors import load_json

FIXTURE = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_ltxv_workflows.json.xz")
FRAMES_NODE = "900"


def _get(url: str) -> bytes:
    return urllib.request.urlopen(url, timeout=30).read()


def _with_frames(prompt: dict) -> dict:
    (decode,) = [k for k, v in prompt.items() if v["class_type"] == "VAEDecode"]
    frames = {"class_type": "SaveImage", "inputs": {"images": [decode, 0], "filename_prefix": "ltxv_frames"}}
    return {**prompt, FRAMES_NODE: frames}


def _frames(workspace: Path, log_path: Path, prompt: dict, *flags: str) -> tuple[np.ndarray, list]:
    """(the SaveImage's frames, the other outputs' files) of one run on a server started with these flags."""
    with serving(workspace, log_path, *flags) as base:
        body = json.dumps({"prompt": prompt, "client_id": str(uuid.uuid4())}).encode()
        pid = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())
        deadline = time.time() + 900
        while True:
            entry = json.loads(_get(f"{base}/history/{pid['prompt_id']}")).get(pid["prompt_id"])
            if entry is not None:
                assert entry["status"]["status_str"] != "error", entry["status"]["messages"]
                if entry["status"]["completed"]:
                    break
            assert time.time() < deadline, "not finished within 900 s"
            time.sleep(0.5)
        outputs = entry["outputs"]
        images = outputs[FRAMES_NODE]["images"]
        frames = np.stack(
            [np.asarray(Image.open(io.BytesIO(_get(f"{base}/view?" + urllib.parse.urlencode(im))))) for im in images]
        )
        videos = [im for key, o in outputs.items() if key != FRAMES_NODE for im in o.get("images", [])]
        return frames, videos


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_shipped_ui_workflow_is_the_templates_graph(name: str) -> None:
    ui = json.loads((REPO / "workflows_json" / f"{name}.ui.json").read_text())
    assert ui == tiny_template_ui(name, TEMPLATES[name])


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_template_renders_the_same_in_both_modes_and_as_comfyui(tmp_path, name: str) -> None:
    prompt = _with_frames(json.loads((REPO / "workflows_json" / f"{name}.json").read_text()))
    workspace = tmp_path / "fresh"
    frames, videos = _frames(workspace, tmp_path / "default.log", prompt)
    other, _ = _frames(workspace, tmp_path / "executors0.log", prompt, "--executors", "0")
    assert frames.shape == (9, 64, 96, 3) and frames.std() > 0
    assert np.array_equal(frames, other), "frames differ between the executor modes"
    assert len(videos) == 1, "the template's SaveVideo wrote no video"
    recorded = FIXTURE["workflows"][name]["pngs_rgb"]
    assert len(recorded) == len(frames)
    for i, (ours, theirs) in enumerate(zip(frames, recorded, strict=True)):
        assert_within_1_of_255_of_record(ours, theirs, f"ComfyUI 0.3.64's frame {i}")
