"""`execution`: the names some packs import from ComfyUI's execution.py."""

from comfy_bridge.execution.node_call import format_value, get_input_data, get_output_from_returns, merge_result_data
from comfy_bridge.execution.node_call import map_node_over_list as _async_map_node_over_list
from comfy_bridge.execution.prompt_executor import ExecutionResult, IsChangedCache, PromptExecutor, full_type_name
from comfy_bridge.validation import validate_inputs, validate_prompt

__all__ = [
    "ExecutionResult",
    "IsChangedCache",
    "PromptExecutor",
    "full_type_name",
    "format_value",
    "get_input_data",
    "get_output_from_returns",
    "_async_map_node_over_list",
    "merge_result_data",
    "validate_inputs",
    "validate_prompt",
]
