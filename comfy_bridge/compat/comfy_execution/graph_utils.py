"""`comfy_execution.graph_utils` -> the engine's own classes."""

from comfy_bridge.execution.graph_utils import ExecutionBlocker, GraphBuilder, Node, add_graph_prefix, is_link

__all__ = ["ExecutionBlocker", "GraphBuilder", "Node", "add_graph_prefix", "is_link"]
