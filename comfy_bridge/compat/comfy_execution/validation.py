"""`comfy_execution.validation` -> our type-compatibility rule."""

from comfy_bridge.validation import validate_node_input

__all__ = ["validate_node_input"]
