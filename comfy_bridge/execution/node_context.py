"""Which node is running in the current task or thread (ComfyUI's `comfy_execution.utils` context)."""

from __future__ import annotations

import contextvars
from typing import NamedTuple


class ExecutionContext(NamedTuple):
    prompt_id: str
    node_id: str
    list_index: int | None


current_executing_context: contextvars.ContextVar[ExecutionContext | None] = contextvars.ContextVar(
    "current_executing_context", default=None
)


def get_executing_context() -> ExecutionContext | None:
    return current_executing_context.get()


def executing_node_key() -> str:
    """`node_id/list_index` of the node running in this context ("-" outside one): the key of its
    output-name claims (nodes.output_claims.bind), the same in every run of a prompt."""
    ctx = get_executing_context()
    return f"{ctx.node_id}/{ctx.list_index}" if ctx is not None else "-"


class CurrentNodeContext:
    """`with CurrentNodeContext(prompt_id, node_id, i):` marks code as running on behalf of that node."""

    def __init__(self, prompt_id: str, node_id: str, list_index: int | None = None):
        self.context = ExecutionContext(prompt_id, node_id, list_index)
        self.token: contextvars.Token | None = None

    def __enter__(self) -> CurrentNodeContext:
        self.token = current_executing_context.set(self.context)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.token is not None:
            current_executing_context.reset(self.token)
