"""`comfy_execution.utils` -> the engine's executing-node context."""

from comfy_bridge.execution.node_context import (
    CurrentNodeContext,
    ExecutionContext,
    current_executing_context,
    get_executing_context,
)

__all__ = ["CurrentNodeContext", "ExecutionContext", "current_executing_context", "get_executing_context"]
