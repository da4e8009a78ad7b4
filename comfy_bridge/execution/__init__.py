"""The graph engine: ComfyUI's execution semantics (order, caching, lazy inputs, expansion, async nodes)."""

from comfy_bridge.execution.graph import DynamicPrompt, ExecutionList, get_input_info
from comfy_bridge.execution.graph_utils import ExecutionBlocker, GraphBuilder, is_link
from comfy_bridge.execution.prompt_executor import ExecutionResult, MessageSink, PromptExecutor, full_type_name

__all__ = [
    "PromptExecutor",
    "MessageSink",
    "ExecutionResult",
    "full_type_name",
    "DynamicPrompt",
    "ExecutionList",
    "get_input_info",
    "ExecutionBlocker",
    "GraphBuilder",
    "is_link",
]
