"""With --concurrent-prompts 2 on a two-executor cluster, two clients' prompts run at the same time
(their executions overlap), each client hears only its own prompt, and the images are the in-process ones."""

from __future__ import annotations

import asyncio
import io
import json
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import aiohttp
import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[2]


def _prompt(seed: int) -> dict:
    prompt = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
    prompt["3"]["inputs"].update(seed=seed, steps=25)
    return prompt


async def _client(base: str, seed: int) -> tuple[str, list[dict], dict]:
    client_id = uuid.uuid4().hex
    host = base.removeprefix("http://")
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(f"ws://{host}/ws?clientId={client_id}") as ws:
            await ws.receive_json()
            async with session.post(f"{base}/prompt", json={"prompt": _prompt(seed), "client_id": client_id}) as r:
                prompt_id = (await r.json())["prompt_id"]
            seen = []
            while True:
                msg = await asyncio.wait_for(ws.receive(), 300)
                if msg.type != aiohttp.WSMsgType.TEXT:
                    continue
                m = json.loads(msg.data)
                seen.append(m)
                if m["type"] == "executing" and m["data"]["node"] is None and m["data"]["prompt_id"] == prompt_id:
                    break
        async with session.get(f"{base}/history/{prompt_id}") as r:
            history = (await r.json())[prompt_id]
    return prompt_id, seen, history


def _window(history: dict) -> tuple[int, int]:
    stamps = {event: data["timestamp"] for event, data in history["status"]["messages"]}
    return stamps["execution_start"], stamps["execution_success"]


def test_two_prompts_overlap_and_stay_apart(serve, demo_workspace, fixed_threads):
    base = serve("--executors", "2", "--executor-threads", "1", "--concurrent-prompts", "2")

    async def both():
        return await asyncio.gather(_client(base, 7), _client(base, 8))

    (pid_a, seen_a, hist_a), (pid_b, seen_b, hist_b) = asyncio.run(both())

    start_a, end_a = _window(hist_a)
    start_b, end_b = _window(hist_b)
    assert start_a < end_b and start_b < end_a, "the two prompts did not run at the same time"
    for pid, seen, other in ((pid_a, seen_a, pid_b), (pid_b, seen_b, pid_a)):
        ids = {m["data"].get("prompt_id") for m in seen if isinstance(m.get("data"), dict)}
        assert pid in ids and other not in ids

    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    registry = build_registry(demo_workspace)
    for seed, hist in ((7, hist_a), (8, hist_b)):
        (out,) = [im for o in hist["outputs"].values() for im in o.get("images", [])]
        served = np.asarray(
            Image.open(io.BytesIO(urllib.request.urlopen(f"{base}/view?" + urllib.parse.urlencode(out)).read()))
        )
        (path,) = asyncio.run(run_prompt(_prompt(seed), None, registry, show_progress=False))
        assert np.array_equal(served, np.asarray(Image.open(path)))
