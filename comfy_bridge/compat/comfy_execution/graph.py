"""`comfy_execution.graph` -> the engine's own classes."""

from comfy_bridge.execution.graph import (
    DependencyCycleError,
    DynamicPrompt,
    ExecutionList,
    NodeInputError,
    NodeNotFoundError,
    TopologicalSort,
    get_input_info,
)
from comfy_bridge.execution.graph_utils import ExecutionBlocker

__all__ = [
    "DependencyCycleError",
    "DynamicPrompt",
    "ExecutionBlocker",
    "ExecutionList",
    "NodeInputError",
    "NodeNotFoundError",
    "TopologicalSort",
    "get_input_info",
]
