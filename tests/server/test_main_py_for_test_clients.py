"""`python main.py` started the way client test suites start a ComfyUI server (ComfyUI's execution tests:
output directory, listen address, port, a relative-to-YAML custom node folder, --cpu, --cache-lru), then
driven like those suites drive it: JSON posted without a JSON content type, websocket `executing` messages
carrying the prompt id, images read back through /history and /view, progress_state kept per client."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import aiohttp
import numpy as np
import pytest
from PIL import Image

from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[2]
READINESS_WINDOW_S = 20  # ComfyUI's suite tries for about this long before every test of a class fails

PACK = textwrap.dedent("""
    import torch

    class FlatImage:
        @classmethod
        def INPUT_TYPES(cls):
            return {"required": {"value": ("FLOAT", {"default": 0.5, "min": 0.0, "max": 1.0})}}
        RETURN_TYPES = ("IMAGE",)
        FUNCTION = "run"

        def run(self, value):
            return (torch.full((1, 4, 4, 3), value),)

    NODE_CLASS_MAPPINGS = {"FlatImage": FlatImage}
""")


@pytest.fixture(scope="module")
def server(tmp_path_factory, demo_workspace):
    root = tmp_path_factory.mktemp("main_py")
    base = root / "base"
    base.mkdir()
    (base / "models").symlink_to(demo_workspace.models_dir)  # demo models already built: start-up stays short
    pack = root / "conf" / "nodes_here" / "flat_pack"
    pack.mkdir(parents=True)
    (pack / "__init__.py").write_text(PACK)
    (root / "conf" / "extra_model_paths.yaml").write_text("testing:\n    custom_nodes: nodes_here\n")
    port = free_port()
    started = time.monotonic()
    proc = subprocess.Popen(
        [
            sys.executable,
            "main.py",
            "--base-directory",
            str(base),
            "--output-directory",
            str(root / "out"),
            "--listen",
            "127.0.0.1",
            "--port",
            str(port),
            "--extra-model-paths-config",
            str(root / "conf" / "extra_model_paths.yaml"),
            "--cpu",
            "--cache-lru",
            "0",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "COMFY_CLUSTER_STATE_DB": "memory"},
    )  # as scripts/run_comfyui_execution_tests.sh
    ready_after = None
    while time.monotonic() - started < 60 and proc.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                ready_after = time.monotonic() - started
                break
        except OSError:
            time.sleep(0.2)
    try:
        assert ready_after is not None, f"main.py never listened (exit code {proc.poll()})"
        yield {"url": f"http://127.0.0.1:{port}", "ready_after": ready_after, "base": base}
    finally:
        proc.send_signal(signal.SIGKILL)  # as the suites stop it; executors exit with their parent
        proc.wait(timeout=30)


def flat_image(tag: str, value: float, output_class: str = "SaveImage") -> dict:
    inputs = {"images": [f"{tag}_img", 0]}
    if output_class == "SaveImage":
        inputs["filename_prefix"] = f"flat_{tag}"
    return {
        f"{tag}_img": {"class_type": "FlatImage", "inputs": {"value": value}},
        f"{tag}_out": {"class_type": output_class, "inputs": inputs},
    }


async def post_like_urllib(session: aiohttp.ClientSession, url: str, body: dict) -> str:
    # urllib.request sends a data body as application/x-www-form-urlencoded; the server must still read JSON.
    async with session.post(
        url + "/prompt", data=json.dumps(body).encode(), headers={"Content-Type": "application/x-www-form-urlencoded"}
    ) as r:
        assert r.status == 200, await r.text()
        return (await r.json())["prompt_id"]


async def until_done(ws: aiohttp.ClientWebSocketResponse, prompt_id: str, timeout: float = 60) -> list[dict]:
    messages = []
    while True:
        msg = await ws.receive(timeout=timeout)
        if msg.type != aiohttp.WSMsgType.TEXT:
            continue
        messages.append(m := json.loads(msg.data))
        if m["type"] == "execution_error":
            raise AssertionError(m["data"])
        if m["type"] == "executing" and m["data"]["prompt_id"] == prompt_id and m["data"]["node"] is None:
            return messages


async def drain(ws: aiohttp.ClientWebSocketResponse, seconds: float) -> list[dict]:
    """Text messages that arrive within `seconds` of each other."""
    extra = []
    try:
        while (msg := await ws.receive(timeout=seconds)).type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
            if msg.type == aiohttp.WSMsgType.TEXT:
                extra.append(json.loads(msg.data))
    except TimeoutError:
        pass
    return extra


def test_ready_within_the_suites_window(server):
    assert server["ready_after"] < READINESS_WINDOW_S, server["ready_after"]


def test_memory_state_writes_no_database(server):
    assert not list(server["base"].glob("*.sqlite3*"))


async def test_prompt_posted_as_form_runs_and_view_truncates_pixels(server):
    client_id = uuid.uuid4().hex
    values = {"a": 0.1, "b": 0.5, "c": 0.3}  # 255*v = 25.5, 127.5, 76.5: truncated, not rounded
    prompt = {}
    for tag, value in values.items():
        prompt.update(flat_image(tag, value))
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(f"{server['url']}/ws?clientId={client_id}") as ws:
            pid = await post_like_urllib(session, server["url"], {"prompt": prompt, "client_id": client_id})
            messages = await until_done(ws, pid)
        assert all("prompt_id" in m["data"] for m in messages if m["type"] == "executing")
        async with session.get(f"{server['url']}/history/{pid}") as r:
            outputs = (await r.json())[pid]["outputs"]
        for tag, value in values.items():
            (image,) = outputs[f"{tag}_out"]["images"]
            async with session.get(f"{server['url']}/view", params=image) as r:
                assert r.status == 200
                pixels = np.asarray(Image.open(io.BytesIO(await r.read())).convert("RGB"))
            assert (pixels == int(255 * np.float32(value))).all(), (tag, pixels[0, 0])


async def test_progress_state_reaches_only_the_prompts_own_client(server):
    ids = [f"client_{n}_{uuid.uuid4().hex}" for n in "ab"]
    async with aiohttp.ClientSession() as session:
        sockets = [await session.ws_connect(f"{server['url']}/ws?clientId={cid}") for cid in ids]
        pids = []
        for n, cid in enumerate(ids):
            prompt = flat_image(f"iso{n}", 0.25 * (n + 1), output_class="PreviewImage")
            pids.append(await post_like_urllib(session, server["url"], {"prompt": prompt, "client_id": cid}))
        seen = await asyncio.gather(*(until_done(ws, pid) for ws, pid in zip(sockets, pids)))
        for ws, got in zip(sockets, seen):
            got.extend(await drain(ws, 0.3))  # anything misaddressed would have arrived by now
            await ws.close()
    for own, other, got in ((pids[0], pids[1], seen[0]), (pids[1], pids[0], seen[1])):
        states = [m["data"]["prompt_id"] for m in got if m["type"] == "progress_state"]
        assert own in states and other not in states
