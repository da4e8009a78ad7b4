"""Run a small API-format prompt of core nodes through the real validation and engine, in-process."""

from __future__ import annotations

from typing import Any

from comfy_bridge import compat
from comfy_bridge.execution import PromptExecutor
from comfy_bridge.registry import NodeRegistry
from comfy_bridge.validation import validate_prompt


class _Sink:
    client_id = last_node_id = None

    def send_sync(self, *args: Any, **kwargs: Any) -> None:
        pass


async def run_core_prompt(prompt: dict, extra_classes: dict | None = None) -> dict:
    """The history outputs of `prompt` run on the core nodes (plus `extra_classes`); fails on any error."""
    compat.install()
    import nodes

    registry = NodeRegistry()
    registry.add_builtin({**nodes.NODE_CLASS_MAPPINGS, **(extra_classes or {})})
    ok, error, outputs, node_errors = await validate_prompt(registry, "p", prompt, None)
    assert ok, (error, node_errors)
    executor = PromptExecutor(registry, _Sink(), cache_type="classic", cache_size=0)
    await executor.execute_async(prompt, "p", {}, outputs)
    assert executor.success, executor.status_messages
    return executor.history_result["outputs"]
