"""The server tests run on the real engine: a real `NodeRegistry` holding the small node classes of
server_nodes.py, the real validation (comfy_bridge.validation.validate_prompt) and the real executor
(comfy_bridge.execution.PromptExecutor), exactly as `create_app` wires them when it loads the core nodes.
Every message sequence, history entry, preview frame, interrupt and progress report a test asserts is
what our engine produced, checked against ComfyUI's protocol (shared/reference/comfyui-protocol.md §3.7,
§4.2-§4.5, §7), never against a stand-in that sends what the test expects.

No fake executor, registry or validator is left in tests/server. The one stand-in is in
test_cluster_stats_route.py: a ZeroMQ socket that registers at a real `cluster.control.head.Head` as executor
"fake-ex" and never answers. Those tests check that /cluster/stats and /metrics report the head's own
bookkeeping (its registered executors, queued invocations and counters) in the route's JSON and
Prometheus shapes; nothing the stand-in sends is asserted as engine behaviour, so they are not circular.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from aiohttp import WSMsgType
from aiohttp.test_utils import TestClient, TestServer

from comfy_bridge.registry import NodeRegistry
from comfy_bridge.server import ServerConfig, create_app
from nodes import progress
from nodes.workspace import Workspace

from . import server_nodes


def make_registry(extra: dict | None = None, web_directories: dict | None = None) -> NodeRegistry:
    """A real registry of the server test nodes (plus `extra` classes), as create_app would build one."""
    registry = NodeRegistry()
    registry.add_builtin({**server_nodes.CLASSES, **(extra or {})}, server_nodes.DISPLAY_NAMES)
    registry.web_directories.update(web_directories or {})
    return registry


def simple_prompt(prefix="stub", save_class="StubSave"):
    return {
        "1": {"class_type": "StubImage", "inputs": {"width": 8}},
        "2": {"class_type": save_class, "inputs": {"images": ["1", 0], "filename_prefix": prefix}},
    }


@pytest.fixture(autouse=True)
def restore_globals():
    """The server activates its workspace and sets PromptServer.instance: undo both after each test."""
    import sys

    from comfy_bridge.server import PromptServer
    from nodes import workspace as workspace_mod

    active = workspace_mod._active
    compat = sys.modules.get("comfy_bridge.compat.server")
    compat_instance = getattr(getattr(compat, "PromptServer", None), "instance", None)
    yield
    workspace_mod._active = active
    PromptServer.instance = None
    if compat is not None:
        compat.PromptServer.instance = compat_instance
    progress.interrupt(False)


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws").create()


@pytest.fixture
def web_root(tmp_path: Path) -> Path:
    root = tmp_path / "web"
    (root / "extensions" / "core").mkdir(parents=True)
    (root / "index.html").write_text("<html>fake ui</html>")
    (root / "extensions" / "core" / "widgets.js").write_text("// core")
    (root / "app.js").write_text("// app")
    return root


@pytest.fixture
async def make_client(workspace, web_root):
    """Start a server on the real engine with the test nodes; keyword arguments override ServerConfig fields."""
    clients = []

    async def make(registry=None, **overrides) -> TestClient:
        config = ServerConfig(workspace=workspace, front_end_root=web_root, **overrides)
        app = create_app(config, registry=registry or make_registry())
        client = TestClient(TestServer(app))
        await client.start_server()
        clients.append(client)
        return client

    yield make
    for c in clients:
        await c.close()


@pytest.fixture
async def client(make_client):
    return await make_client()


async def receive_json_until(ws, predicate, timeout=30.0) -> list:
    """Collect text messages until one matches predicate (inclusive); binary frames are kept as bytes."""
    got = []
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"timed out; received {got}")
        msg = await ws.receive(timeout=remaining)
        if msg.type == WSMsgType.TEXT:
            data = json.loads(msg.data)
            got.append(data)
            if predicate(data):
                return got
        elif msg.type == WSMsgType.BINARY:
            got.append(msg.data)
        else:
            raise AssertionError(f"socket ended: {msg.type}; received {got}")


async def wait_history(client, prompt_id, timeout=30.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = await client.get(f"/history/{prompt_id}")
        data = await r.json()
        if prompt_id in data:
            return data[prompt_id]
        await asyncio.sleep(0.02)
    raise AssertionError(f"prompt {prompt_id} never reached history")


async def wait_slow_node_running(timeout=30.0) -> None:
    """Wait until a StubSlow node is inside its loop: it has checked the interrupt flag (which the
    executor cleared as the prompt started) at least twice since this call."""
    start = server_nodes.StubSlow.ticks
    await wait_for(lambda: server_nodes.StubSlow.ticks >= start + 2, "a StubSlow node running", timeout)


async def wait_for(condition, what: str, timeout=30.0) -> None:
    """Wait until condition() is true (an upper bound only: the test concludes from the condition)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: never happened")
        await asyncio.sleep(0.01)
