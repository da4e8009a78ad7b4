"""Context windows through `comfy-cluster serve`, with one executor process (the default) and in-process
(`--executors 0`): the demo SD1 model sampled with ContextWindowsManual over the latent's width (dim 3, windows of 4
of its 8 columns overlapping by 2) gives the same images in both modes, and not the plain run's images (the windows'
predictions are blended where they overlap)."""

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

REPO = Path(__file__).resolve().parents[2]
BASE = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())


def _prompt(windows: bool) -> dict:
    prompt = json.loads(json.dumps(BASE))
    prompt["5"]["inputs"].update(width=64, height=64, batch_size=2)
    prompt["3"]["inputs"].update(steps=4)
    if windows:
        prompt["20"] = {
            "class_type": "ContextWindowsManual",
            "inputs": {
                "model": ["4", 0],
                "context_length": 4,
                "context_overlap": 2,
                "context_schedule": "standard_static",
                "context_stride": 1,
                "closed_loop": False,
                "fuse_method": "pyramid",
                "dim": 3,
                "freenoise": False,
            },
        }
        prompt["3"]["inputs"]["model"] = ["20", 0]
    return prompt


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read()


def _images(base: str, prompt: dict) -> np.ndarray:
    body = json.dumps({"prompt": prompt, "client_id": str(uuid.uuid4())}).encode()
    pid = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())["prompt_id"]
    deadline = time.time() + 300
    while time.time() < deadline:
        entry = json.loads(_get(f"{base}/history/{pid}")).get(pid)
        if entry and entry["status"]["status_str"] == "error":
            raise AssertionError(entry["status"])
        if entry and entry["status"]["completed"]:
            saved = next(o["images"] for o in entry["outputs"].values() if "images" in o)
            return np.stack(
                [np.asarray(Image.open(io.BytesIO(_get(f"{base}/view?" + urllib.parse.urlencode(e))))) for e in saved]
            )
        time.sleep(0.3)
    raise TimeoutError(pid)


@pytest.fixture(scope="module")
def servers(serve):
    # both compute with one torch thread: results differ between thread counts
    return {
        "default": serve("--executor-threads", "1"),
        "in-process": serve("--executors", "0", "--executor-threads", "1"),
    }


def test_context_windows_give_the_same_images_in_both_modes(servers):
    windowed = {mode: _images(base, _prompt(True)) for mode, base in servers.items()}
    assert windowed["default"].shape == (2, 64, 64, 3)
    assert np.array_equal(windowed["default"], windowed["in-process"])
    plain = _images(servers["in-process"], _prompt(False))
    assert not np.array_equal(windowed["in-process"], plain)
