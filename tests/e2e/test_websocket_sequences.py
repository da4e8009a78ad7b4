"""A websocket client sees ComfyUI's exact message sequence (protocol reference §4.5) for a fresh, a fully
cached and a failing prompt on the demo models, served by `comfy-cluster serve`."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import aiohttp
import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server(serve):
    return serve("--executors", "0").removeprefix("http://")


async def _run(base: str, prompt: dict) -> list[tuple[str, dict]]:
    """Queue `prompt` as one websocket client and collect its text messages until `executing` node null."""
    client_id = uuid.uuid4().hex
    messages = []
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(f"ws://{base}/ws?clientId={client_id}") as ws:
            first = await ws.receive_json()
            assert first["type"] == "status" and first["data"]["sid"] == client_id
            async with session.post(f"http://{base}/prompt", json={"prompt": prompt, "client_id": client_id}) as r:
                assert r.status == 200, await r.text()
                prompt_id = (await r.json())["prompt_id"]
            while True:
                msg = await asyncio.wait_for(ws.receive(), 120)
                if msg.type != aiohttp.WSMsgType.TEXT:
                    continue
                m = json.loads(msg.data)
                messages.append((m["type"], m["data"]))
                if m["type"] == "executing" and m["data"]["node"] is None:
                    assert m["data"]["prompt_id"] == prompt_id
                    return messages


def _kinds(messages) -> list[str]:
    """Message types with executing/executed/progress collapsed to the node they name."""
    out = []
    for kind, data in messages:
        if kind in ("executing", "executed"):
            out.append(f"{kind}:{data['node']}")
        elif kind in ("progress", "progress_state"):
            continue  # counted separately: one per denoising step and per node state change
        else:
            out.append(kind)
    return out


def _prompt(seed: int) -> dict:
    prompt = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
    prompt["3"]["inputs"].update(seed=seed, steps=4)
    prompt["5"]["inputs"].update(width=64, height=64)
    return prompt


ORDER = ["4", "5", "6", "7", "3", "8", "9"]


def test_fresh_cached_and_failing_sequences(server):
    seed = int(time.time() * 1000) % 100000  # a seed no earlier run cached
    fresh = asyncio.run(_run(server, _prompt(seed)))
    kinds = _kinds(fresh)
    assert kinds[:4] == ["status", "status", "execution_start", "execution_cached"]
    executing = [k.split(":")[1] for k in kinds if k.startswith("executing:") and k != "executing:None"]
    assert sorted(executing) == sorted(ORDER) and executing.index("3") < executing.index("8") < executing.index("9")
    assert kinds[-4:] == ["executed:9", "execution_success", "status", "executing:None"]
    steps = [d for k, d in fresh if k == "progress"]
    assert [d["value"] for d in steps] == [1, 2, 3, 4] and all(d["node"] == "3" and d["max"] == 4 for d in steps)
    cached_data = next(d for k, d in fresh if k == "execution_cached")
    assert cached_data["nodes"] == []

    cached = asyncio.run(_run(server, _prompt(seed)))
    kinds = _kinds(cached)
    assert kinds == [
        "status",
        "status",
        "execution_start",
        "execution_cached",
        "executed:9",
        "execution_success",
        "status",
        "executing:None",
    ]
    assert sorted(next(d for k, d in cached if k == "execution_cached")["nodes"]) == sorted(ORDER)
    assert (
        next(d for k, d in cached if k == "executed")["output"]
        == next(d for k, d in fresh if k == "executed")["output"]
    )

    failing = _prompt(seed + 2)
    failing["4"]["inputs"]["ckpt_name"] = "sdxl-tiny.safetensors"
    failing["10"] = {
        "class_type": "LoraLoader",
        "inputs": {
            "model": ["4", 0],
            "clip": ["4", 1],
            "lora_name": "sd1-tiny-lora.safetensors",
            "strength_model": 1.0,
            "strength_clip": 1.0,
        },
    }
    failing["6"]["inputs"]["clip"] = ["10", 1]
    messages = asyncio.run(_run(server, failing))
    kinds = _kinds(messages)
    assert "execution_success" not in kinds
    assert kinds[-3:] == ["execution_error", "status", "executing:None"]
    error = next(d for k, d in messages if k == "execution_error")
    assert error["node_id"] == "6" and error["node_type"] == "CLIPTextEncode"
    assert "another architecture" in error["exception_message"]
