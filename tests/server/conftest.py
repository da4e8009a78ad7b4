"""Fakes for the server tests: a tiny node registry, validator and executor that speak the engine
contract (comfy_bridge/registry, validation, execution), so the server is tested on its own."""
from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from aiohttp import WSMsgType
from aiohttp.test_utils import TestClient, TestServer

from comfy_bridge import progress
from comfy_bridge.server import ServerConfig, create_app
from comfy_bridge.workspace import Workspace


class FakeImage:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"width": ("INT", {"default": 8, "min": 1, "max": 64})}}
    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "run"
    CATEGORY = "test"


class FakeSave:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"images": ("IMAGE",), "filename_prefix": ("STRING", {"default": "fake"})}}
    RETURN_TYPES = ()
    OUTPUT_NODE = True
    FUNCTION = "run"
    CATEGORY = "test"


class FakeError(FakeSave):
    pass


class FakeSlow(FakeSave):
    pass


class FakePreview(FakeSave):
    pass


class FakeRegistry:
    def __init__(self, web_directories: dict | None = None):
        self.classes = {c.__name__: c for c in (FakeImage, FakeSave, FakeError, FakeSlow, FakePreview)}
        self.display_names = {"FakeImage": "Fake Image"}
        self.web_directories = web_directories or {}

    def get(self, class_type):
        return self.classes.get(class_type)

    def node_info(self, class_type):
        cls = self.classes[class_type]
        inputs = cls.INPUT_TYPES()
        return {"input": inputs, "input_order": {k: list(v) for k, v in inputs.items()},
                "output": list(cls.RETURN_TYPES), "output_is_list": [False] * len(cls.RETURN_TYPES),
                "output_name": list(cls.RETURN_TYPES), "name": class_type,
                "display_name": self.display_names.get(class_type, class_type), "description": "",
                "python_module": "tests", "category": cls.CATEGORY,
                "output_node": bool(getattr(cls, "OUTPUT_NODE", False))}

    def object_info(self):
        return {k: self.node_info(k) for k in self.classes}


async def fake_validate(registry, prompt_id, prompt, partial_execution_targets):
    """Enough of validate_prompt's contract: unknown class -> invalid_prompt, width < 1 -> node error."""
    for node_id, node in prompt.items():
        if registry.get(node.get("class_type")) is None:
            err = {"type": "invalid_prompt", "message": f"Cannot execute because node {node.get('class_type')} "
                   "does not exist.", "details": f"Node ID '#{node_id}'", "extra_info": {}}
            return False, err, [], {}
    node_errors = {}
    for node_id, node in prompt.items():
        width = node["inputs"].get("width")
        if isinstance(width, int) and width < 1:
            node_errors[node_id] = {"errors": [{"type": "value_smaller_than_min",
                                                "message": f"Value {width} smaller than min of 1",
                                                "details": "width", "extra_info": {"input_name": "width"}}],
                                    "dependent_outputs": [], "class_type": node["class_type"]}
    outputs = [n for n, node in prompt.items() if getattr(registry.get(node["class_type"]), "OUTPUT_NODE", False)]
    if node_errors:
        err = {"type": "prompt_outputs_failed_validation", "message": "Prompt outputs failed validation",
               "details": "", "extra_info": {}}
        return False, err, [], node_errors
    if not outputs:
        return False, {"type": "prompt_no_outputs", "message": "Prompt has no outputs", "details": "",
                       "extra_info": {}}, [], {}
    return True, None, outputs, {}


class FakeExecutor:
    """Sends ComfyUI's message sequence for a prompt, honouring the addressing rules of the contract."""
    instances: list["FakeExecutor"] = []

    def __init__(self, server):
        self.server = server
        self.success = False
        self.status_messages = []
        self.history_result = {}
        self.resets = 0
        self.prompts: list[str] = []
        self.extra_data_seen: list[dict] = []
        FakeExecutor.instances.append(self)

    def reset(self):
        self.resets += 1

    def _status(self, event, data, broadcast=False):
        data = {**data, "timestamp": int(time.time() * 1000)}
        self.status_messages.append((event, data))
        if self.server.client_id is not None or broadcast:
            self.server.send_sync(event, data, self.server.client_id)

    async def execute_async(self, prompt, prompt_id, extra_data, execute_outputs):
        self.prompts.append(prompt_id)
        self.extra_data_seen.append(extra_data)
        self.status_messages, self.history_result, self.success = [], {"outputs": {}, "meta": {}}, False
        sid = self.server.client_id
        self._status("execution_start", {"prompt_id": prompt_id})
        self._status("execution_cached", {"nodes": [], "prompt_id": prompt_id})
        executed = []
        for node_id in sorted(prompt):
            class_type = prompt[node_id]["class_type"]
            self.server.last_node_id = node_id
            if sid is not None:
                self.server.send_sync("executing", {"node": node_id, "display_node": node_id,
                                                    "prompt_id": prompt_id}, sid)
            if class_type == "FakeError":
                self._status("execution_error", {"prompt_id": prompt_id, "node_id": node_id, "node_type": class_type,
                                                 "executed": executed, "exception_message": "boom\n",
                                                 "exception_type": "RuntimeError", "traceback": [],
                                                 "current_inputs": {}, "current_outputs": list(prompt)})
                return
            if class_type == "FakeSlow":
                for _ in range(500):
                    if progress.interrupt_requested():
                        progress.interrupt(False)
                        self._status("execution_interrupted", {"prompt_id": prompt_id, "node_id": node_id,
                                                               "node_type": class_type, "executed": executed},
                                     broadcast=True)
                        return
                    await asyncio.sleep(0.01)
            if class_type == "FakePreview":
                from PIL import Image
                image = Image.new("RGB", (16, 8), (255, 0, 0))
                meta = {"node_id": node_id, "prompt_id": prompt_id, "display_node_id": node_id,
                        "parent_node_id": None, "real_node_id": node_id}
                self.server.send_sync("progress", {"value": 0, "max": 1, "prompt_id": prompt_id, "node": node_id},
                                      sid)
                self.server.send_sync(4, (("PNG", image, 8), meta), sid)
            if class_type in ("FakeSave", "FakeSlow", "FakePreview"):
                out = self.server.workspace.output_dir / f"{prompt[node_id]['inputs'].get('filename_prefix', 'x')}.png"
                out.write_bytes(b"\x89PNG fake")
                ui = {"images": [{"filename": out.name, "subfolder": "", "type": "output"}]}
                self.history_result["outputs"][node_id] = ui
                self.history_result["meta"][node_id] = {"node_id": node_id, "display_node": node_id,
                                                        "parent_node": None, "real_node_id": node_id}
                if sid is not None:
                    self.server.send_sync("executed", {"node": node_id, "display_node": node_id, "output": ui,
                                                       "prompt_id": prompt_id}, sid)
            executed.append(node_id)
        self.success = True
        self._status("execution_success", {"prompt_id": prompt_id})


def simple_prompt(prefix="fake", save_class="FakeSave"):
    return {"1": {"class_type": "FakeImage", "inputs": {"width": 8}},
            "2": {"class_type": save_class, "inputs": {"images": ["1", 0], "filename_prefix": prefix}}}


@pytest.fixture(autouse=True)
def restore_globals():
    """The server activates its workspace and sets PromptServer.instance: undo both after each test."""
    import sys

    from comfy_bridge import workspace as workspace_mod
    from comfy_bridge.server import PromptServer
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
    """Start a server on fakes; keyword arguments override ServerConfig fields."""
    clients = []

    async def make(registry=None, **overrides) -> TestClient:
        FakeExecutor.instances.clear()
        config = ServerConfig(workspace=workspace, front_end_root=web_root, **overrides)
        app = create_app(config, registry=registry or FakeRegistry(), executor_factory=FakeExecutor,
                         validate=fake_validate)
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


async def receive_json_until(ws, predicate, timeout=5.0) -> list:
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


async def wait_history(client, prompt_id, timeout=5.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = await client.get(f"/history/{prompt_id}")
        data = await r.json()
        if prompt_id in data:
            return data[prompt_id]
        await asyncio.sleep(0.02)
    raise AssertionError(f"prompt {prompt_id} never reached history")


async def wait_node_running(node_id: str, timeout=5.0) -> None:
    """Wait until the worker is inside `node_id` (after the executor cleared stale interrupts)."""
    from comfy_bridge.server import PromptServer
    deadline = time.monotonic() + timeout
    while PromptServer.instance.last_node_id != node_id:
        if time.monotonic() > deadline:
            raise AssertionError(f"node {node_id} never started")
        await asyncio.sleep(0.01)
