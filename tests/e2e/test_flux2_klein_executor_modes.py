"""The FLUX.2 Klein demo workflow (workflows_json/flux2_klein.json, on the flux2-klein-tiny files a fresh
workspace gets) renders on `serve` with its default executors and with `--executors 0` (in-process), and the
two images are identical."""

from __future__ import annotations

import io
import json
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import numpy as np
from PIL import Image

WORKFLOW = Path(__file__).resolve().parents[2] / "workflows_json" / "flux2_klein.json"


def render(base: str, prompt: dict) -> list[np.ndarray]:
    body = json.dumps({"prompt": prompt, "client_id": str(uuid.uuid4())}).encode()
    pid = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())["prompt_id"]
    deadline = time.time() + 300
    while time.time() < deadline:
        history = json.loads(urllib.request.urlopen(f"{base}/history/{pid}", timeout=30).read())
        if pid in history and history[pid]["status"]["completed"]:
            break
        assert not (pid in history and history[pid]["status"]["status_str"] == "error"), history[pid]["status"]
        time.sleep(0.3)
    else:
        raise TimeoutError(pid)
    return [
        np.asarray(
            Image.open(
                io.BytesIO(urllib.request.urlopen(f"{base}/view?" + urllib.parse.urlencode(im), timeout=30).read())
            )
        )
        for out in history[pid]["outputs"].values()
        for im in out.get("images", [])
    ]


def test_default_executors_and_in_process_give_the_same_klein_image(serve):
    prompt = json.loads(WORKFLOW.read_text())
    on_executors = render(serve("--executor-threads", "1"), prompt)
    in_process = render(serve("--executors", "0", "--executor-threads", "1"), prompt)
    assert len(on_executors) == len(in_process) == 1
    a, b = on_executors[0], in_process[0]
    assert a.shape == (128, 128, 3) and a.min() != a.max()
    assert np.array_equal(a, b), f"{int((a != b).sum())} differing values"
