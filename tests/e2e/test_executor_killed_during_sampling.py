"""SIGKILL an executor process while prompts are sampling: every request still completes, none is lost,
and the images are the ones the in-process run gives."""
from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import numpy as np
import psutil
from PIL import Image

REPO = Path(__file__).resolve().parents[2]


def _get(url: str) -> bytes:
    return urllib.request.urlopen(url, timeout=30).read()


def _prompt(seed: int) -> dict:
    prompt = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
    prompt["3"]["inputs"].update(seed=seed, steps=30)
    return prompt


def _executors(server_port: int) -> list[psutil.Process]:
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "serve" in cmd and "--port" in cmd and cmd[cmd.index("--port") + 1] == str(server_port):
            return [c for c in proc.children(recursive=True) if "cluster.executor" in " ".join(c.cmdline())]
    return []


def test_requests_survive_an_executor_kill(serve, demo_workspace, fixed_threads):
    base = serve("--executors", "2", "--executor-threads", "1")
    port = int(base.rsplit(":", 1)[1])
    seeds = [101, 202, 303]
    ids = []
    for seed in seeds:
        body = json.dumps({"prompt": _prompt(seed), "client_id": uuid.uuid4().hex}).encode()
        ids.append(json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())
                   ["prompt_id"])
    # Wait until sampling is under way (the first prompt is running), then kill one executor.
    deadline = time.time() + 120
    while not json.loads(_get(base + "/queue"))["queue_running"]:
        assert time.time() < deadline
        time.sleep(0.1)
    time.sleep(1.0)
    victims = _executors(port)
    assert len(victims) == 2
    os.kill(victims[0].pid, signal.SIGKILL)

    images = {}
    deadline = time.time() + 600
    for pid in ids:
        while True:
            history = json.loads(_get(f"{base}/history/{pid}"))
            if pid in history and history[pid]["status"]["completed"]:
                break
            assert not (pid in history and history[pid]["status"]["status_str"] == "error"), history[pid]["status"]
            assert time.time() < deadline, f"{pid} never finished"
            time.sleep(0.3)
        (out,) = [im for o in history[pid]["outputs"].values() for im in o.get("images", [])]
        images[pid] = np.asarray(Image.open(io.BytesIO(_get(f"{base}/view?" + urllib.parse.urlencode(out)))))

    from comfy_bridge.registry import build_registry
    from comfy_bridge.run import run_prompt
    registry = build_registry(demo_workspace)
    for pid, seed in zip(ids, seeds):
        (path,) = asyncio.run(run_prompt(_prompt(seed), None, registry, show_progress=False))
        assert np.array_equal(images[pid], np.asarray(Image.open(path))), f"seed {seed} differs after the kill"
