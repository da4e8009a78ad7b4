"""Fixtures: a registry of our test nodes, a recording message sink and an executor."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from comfy_bridge import compat  # noqa: E402
from comfy_bridge.execution import PromptExecutor  # noqa: E402
from comfy_bridge.registry import NodeRegistry  # noqa: E402
from comfy_bridge.validation import validate_prompt  # noqa: E402
from nodes.workspace import Workspace, activate  # noqa: E402

compat.install()
import engine_nodes  # noqa: E402


class RecordingSink:
    """Records every message the engine sends, like a websocket client would see them."""

    def __init__(self) -> None:
        self.client_id: str | None = None
        self.last_node_id: str | None = None
        self.messages: list[tuple] = []

    def send_sync(self, event, data, sid=None) -> None:
        self.messages.append((event, data, sid))

    def events(self, *names: str) -> list[tuple]:
        return [(e, d) for e, d, _ in self.messages if not names or e in names]

    def executing(self) -> list[str]:
        return [d["node"] for e, d in self.events("executing")]


@pytest.fixture(autouse=True)
def _workspace(tmp_path):
    from nodes import workspace as ws_module

    previous = ws_module._active
    activate(Workspace(tmp_path / "ws").create())
    engine_nodes.CALLS.clear()
    yield
    ws_module._active = previous  # later tests (and modules) find the workspace they had


@pytest.fixture
def registry() -> NodeRegistry:
    reg = NodeRegistry()
    reg.add_builtin(dict(engine_nodes.CLASSES), {"Const": "Constant"})
    return reg


@pytest.fixture
def sink() -> RecordingSink:
    return RecordingSink()


@pytest.fixture
def make_executor(registry, sink):
    def make(cache_type: str = "classic", cache_size: int = 0) -> PromptExecutor:
        return PromptExecutor(registry, sink, cache_type=cache_type, cache_size=cache_size)

    return make


@pytest.fixture
def run(registry, sink, make_executor):
    """Validate and execute a prompt the way the queue worker does; returns the executor."""
    default = make_executor()

    async def _run(
        prompt: dict,
        executor: PromptExecutor | None = None,
        prompt_id: str = "p1",
        client_id: str | None = "client",
        targets: list[str] | None = None,
    ) -> PromptExecutor:
        executor = executor or default
        ok, error, outputs, node_errors = await validate_prompt(registry, prompt_id, prompt, targets)
        assert ok, (error, node_errors)
        sink.messages.clear()
        await executor.execute_async(prompt, prompt_id, {"client_id": client_id} if client_id else {}, outputs)
        return executor

    return _run
