"""Every offered sampler (and every scheduler) gives the same image in-process, on one executor and on
two executors: a sampler's multistep history and noise-generator state cross processes between steps
through the shared-memory data plane, and a step that lands on another executor continues exactly.

One torch thread everywhere, so the images are compared bit for bit. Four steps at 64 px on the demo SD1
model: enough that every sampler runs steps >= 1 (the ancestral and SDE ones draw noise there)."""

from __future__ import annotations

import asyncio
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

from nodes.sampling.samplers import SAMPLER_NAMES
from nodes.sampling.schedules import SCHEDULER_NAMES

REPO = Path(__file__).resolve().parents[2]
BASE_PROMPT = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
# (sampler, scheduler): every sampler on karras, every scheduler under a noise-drawing sampler
CASES = [(s, "karras") for s in SAMPLER_NAMES] + [("euler_ancestral", s) for s in SCHEDULER_NAMES if s != "karras"]


def prompt_for(sampler: str, scheduler: str) -> dict:
    prompt = json.loads(json.dumps(BASE_PROMPT))
    prompt["3"]["inputs"].update(sampler_name=sampler, scheduler=scheduler, steps=4)
    prompt["5"]["inputs"].update(width=64, height=64)
    prompt["9"]["inputs"]["filename_prefix"] = f"matrix_{sampler}_{scheduler}"
    return prompt


def _get(url: str) -> bytes:
    return urllib.request.urlopen(url, timeout=30).read()


def render_on_server(base: str, prompts: dict[str, dict], timeout_s: float = 600) -> dict[str, np.ndarray]:
    """Queue every prompt at once, then collect each one's single image (failures raise with their error)."""
    ids = {}
    for case, prompt in prompts.items():
        body = json.dumps({"prompt": prompt, "client_id": str(uuid.uuid4())}).encode()
        ids[case] = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())[
            "prompt_id"
        ]
    images: dict[str, np.ndarray] = {}
    deadline = time.time() + timeout_s
    while len(images) < len(ids) and time.time() < deadline:
        for case, pid in ids.items():
            if case in images:
                continue
            entry = json.loads(_get(f"{base}/history/{pid}")).get(pid)
            if entry is None:
                continue
            status = entry["status"]
            assert status["status_str"] != "error", f"{case}: {status['messages']}"
            if status["completed"]:
                (out,) = [o for o in entry["outputs"].values() if o.get("images")]
                data = _get(f"{base}/view?" + urllib.parse.urlencode(out["images"][0]))
                images[case] = np.asarray(Image.open(io.BytesIO(data)))
        time.sleep(0.2)
    missing = sorted(set(ids) - set(images))
    assert not missing, f"not finished within {timeout_s} s: {missing}"
    return images


def render_in_process(workspace, prompts: dict[str, dict]) -> dict[str, np.ndarray]:
    """Each prompt's single image, rendered in this process with one torch thread."""
    import torch

    from cluster.local import set_threads
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    before = torch.get_num_threads()
    set_threads(1)
    try:
        registry = build_registry(workspace)
        out = {}
        for case, prompt in prompts.items():
            (path,) = asyncio.run(run_prompt(prompt, None, registry, show_progress=False))
            out[case] = np.asarray(Image.open(path))
        return out
    finally:
        set_threads(before)


def differing_cases(remote: dict[str, np.ndarray], local: dict[str, np.ndarray]) -> dict[str, int]:
    """Case -> how many values differ, for the cases whose images are not identical."""
    return {
        case: int((remote[case] != image).sum()) if remote[case].shape == image.shape else -1
        for case, image in local.items()
        if not np.array_equal(remote[case], image)
    }


def matrix_prompts() -> dict[str, dict]:
    return {f"{a}/{b}": prompt_for(a, b) for a, b in CASES}


@pytest.fixture(scope="module")
def in_process_images(demo_workspace) -> dict[str, np.ndarray]:
    return render_in_process(demo_workspace, matrix_prompts())


@pytest.mark.parametrize("executors", [1, 2])
def test_every_sampler_and_scheduler_on_executors_gives_the_in_process_image(serve, in_process_images, executors):
    base = serve("--executors", str(executors), "--executor-threads", "1")
    differing = differing_cases(render_on_server(base, matrix_prompts()), in_process_images)
    assert not differing, f"images differ from the in-process run (values differing per case): {differing}"
