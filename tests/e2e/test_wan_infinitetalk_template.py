"""The web UI's InfiniteTalk template (workflows_json/wan_infinitetalk_template.json, written by
scripts/wan_infinitetalk_template_workflow.py: the tiny two-head Wan 2.1 I2V file, InfiniteTalk patch, wav2vec 2.0
encoder, LoRA, umT5 and Wan 2.1 VAE; example.png and example.wav; 64x64, clips of 9 frames, 2 steps, fixed seeds)
from a fresh, empty workspace: two speakers, the base clip and its extension from the last 9 frames, both joined.
All 18 frames (a SaveImage beside the template's SaveVideos) are the same with the default executors and with
`--executors 0`; the extension differs from the base clip (its own audio window and noise)."""

from __future__ import annotations

import io
import json
import time
import urllib.parse
import urllib.request
import uuid

import numpy as np
from PIL import Image

from scripts.wan_infinitetalk_template_workflow import NAME, tiny_template
from tests.e2e.served import REPO, serving

WORKFLOW = REPO / "workflows_json" / f"{NAME}.json"
FRAMES = "900"


def _get(url: str) -> bytes:
    return urllib.request.urlopen(url, timeout=30).read()


def _frames(base: str, prompt: dict) -> np.ndarray:
    body = json.dumps({"prompt": prompt, "client_id": str(uuid.uuid4())}).encode()
    pid = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())["prompt_id"]
    deadline = time.time() + 600
    while True:
        entry = json.loads(_get(f"{base}/history/{pid}")).get(pid)
        if entry is not None:
            assert entry["status"]["status_str"] != "error", entry["status"]["messages"]
            if entry["status"]["completed"]:
                break
        assert time.time() < deadline, "not finished within 600 s"
        time.sleep(0.5)
    images = entry["outputs"][FRAMES]["images"]
    return np.stack(
        [np.asarray(Image.open(io.BytesIO(_get(f"{base}/view?" + urllib.parse.urlencode(im))))) for im in images]
    )


def test_shipped_ui_workflow_is_the_tiny_template() -> None:
    ui = json.loads(WORKFLOW.with_suffix(".ui.json").read_text())
    assert ui == tiny_template()
    prompt = json.loads(WORKFLOW.read_text())
    talks = [v for v in prompt.values() if v["class_type"] == "WanInfiniteTalkToVideo"]
    assert len(talks) == 2 and all(t["inputs"]["mode"] == "two_speakers" for t in talks)
    assert sum("previous_frames" in t["inputs"] for t in talks) == 1


def test_template_frames_equal_in_both_executor_modes(tmp_path) -> None:
    prompt = json.loads(WORKFLOW.read_text())
    (joined,) = [k for k, v in prompt.items() if v["class_type"] == "BatchImagesNode"]  # base clip + extension
    prompt[FRAMES] = {"class_type": "SaveImage", "inputs": {"images": [joined, 0], "filename_prefix": "itk"}}
    workspace = tmp_path / "fresh"
    with serving(workspace, tmp_path / "default.log") as base:
        default = _frames(base, prompt)
    with serving(workspace, tmp_path / "executors0.log", "--executors", "0") as base:
        in_process = _frames(base, prompt)
    assert default.shape == (18, 64, 64, 3)
    assert np.array_equal(default, in_process), "the executor modes differ"
    assert default.std() > 0 and not np.array_equal(default[:9], default[9:])
