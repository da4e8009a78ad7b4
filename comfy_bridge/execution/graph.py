"""The prompt as it grows during execution, and the schedule of nodes (ComfyUI's order)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any, Literal

from comfy_bridge.execution.graph_utils import is_link


class DependencyCycleError(Exception):
    pass


class NodeInputError(Exception):
    pass


class NodeNotFoundError(Exception):
    pass


class DynamicPrompt:
    """The submitted prompt plus the ephemeral nodes that node expansion adds while it runs."""

    def __init__(self, original_prompt: dict):
        self.original_prompt = original_prompt
        self.ephemeral_prompt: dict[str, dict] = {}
        self.ephemeral_parents: dict[str, str] = {}
        self.ephemeral_display: dict[str, str] = {}

    def get_node(self, node_id: str) -> dict:
        if node_id in self.ephemeral_prompt:
            return self.ephemeral_prompt[node_id]
        if node_id in self.original_prompt:
            return self.original_prompt[node_id]
        raise NodeNotFoundError(f"Node {node_id} not found")

    def has_node(self, node_id: str) -> bool:
        return node_id in self.original_prompt or node_id in self.ephemeral_prompt

    def add_ephemeral_node(self, node_id: str, node_info: dict, parent_id: str, display_id: str) -> None:
        self.ephemeral_prompt[node_id] = node_info
        self.ephemeral_parents[node_id] = parent_id
        self.ephemeral_display[node_id] = display_id

    def get_real_node_id(self, node_id: str) -> str:
        while node_id in self.ephemeral_parents:
            node_id = self.ephemeral_parents[node_id]
        return node_id

    def get_parent_node_id(self, node_id: str) -> str | None:
        return self.ephemeral_parents.get(node_id)

    def get_display_node_id(self, node_id: str) -> str:
        while node_id in self.ephemeral_display:
            node_id = self.ephemeral_display[node_id]
        return node_id

    def all_node_ids(self) -> set[str]:
        return set(self.original_prompt) | set(self.ephemeral_prompt)

    def get_original_prompt(self) -> dict:
        return self.original_prompt


InputCategory = Literal["required", "optional", "hidden"]


def get_input_info(
    class_def: type, input_name: str, valid_inputs: dict | None = None
) -> tuple[Any, InputCategory, dict] | tuple[None, None, None]:
    """(type, category, options) of a declared input, or (None, None, None) when it is not declared."""
    valid_inputs = valid_inputs or class_def.INPUT_TYPES()
    for category in ("required", "optional", "hidden"):
        section = valid_inputs.get(category)
        # presence, not truth: a pack's optional dict may be empty yet claim every name (rgthree's
        # FlexibleOptionalInputType answers `in` with True for the widgets the web UI adds)
        if section is not None and input_name in section:
            info = section[input_name]
            if isinstance(info, str):  # V1 hidden inputs are bare strings ("PROMPT")
                return info, category, {}
            return info[0], category, (info[1] if len(info) > 1 else {})
    return None, None, None


class TopologicalSort:
    """Pending nodes and who blocks whom; a node is ready when nothing blocks it."""

    def __init__(self, dynprompt: DynamicPrompt, class_of: Callable[[str], type]):
        self.dynprompt = dynprompt
        self.class_of = class_of
        self.pendingNodes: dict[str, bool] = {}
        self.blockCount: dict[str, int] = {}
        self.blocking: dict[str, dict[str, dict[int, bool]]] = {}
        self.externalBlocks = 0
        self.unblockedEvent = asyncio.Event()

    def node_class(self, node_id: str) -> type:
        return self.class_of(self.dynprompt.get_node(node_id)["class_type"])

    def get_input_info(self, unique_id: str, input_name: str) -> tuple:
        # A V3 node's dynamic inputs are named as this prompt node has them ("vals.v0"), so a lazy one is
        # recognised as lazy (as ComfyUI does since its dynamic types).
        from comfy_bridge.execution.nodeapi import input_types, is_v3

        class_def = self.node_class(unique_id)
        if is_v3(class_def):
            inputs = input_types(class_def, live_inputs=self.dynprompt.get_node(unique_id)["inputs"])
            return get_input_info(class_def, input_name, inputs)
        return get_input_info(class_def, input_name)

    def make_input_strong_link(self, to_node_id: str, to_input: str) -> None:
        inputs = self.dynprompt.get_node(to_node_id)["inputs"]
        if to_input not in inputs:
            raise NodeInputError(
                f"Node {to_node_id} says it needs input {to_input}, but there is no input to that node at all"
            )
        value = inputs[to_input]
        if not is_link(value):
            raise NodeInputError(f"Node {to_node_id} says it needs input {to_input}, but that value is a constant")
        self.add_strong_link(value[0], value[1], to_node_id)

    def add_strong_link(self, from_node_id: str, from_socket: int, to_node_id: str) -> None:
        if self.is_cached(from_node_id):
            return
        self.add_node(from_node_id)
        if to_node_id not in self.blocking[from_node_id]:
            self.blocking[from_node_id][to_node_id] = {}
            self.blockCount[to_node_id] += 1
        self.blocking[from_node_id][to_node_id][from_socket] = True

    def add_node(self, node_unique_id: str, include_lazy: bool = False, subgraph_nodes: set | None = None) -> None:
        """Add a node and (iteratively) every uncached, non-lazy dependency it needs."""
        stack = [node_unique_id]
        links = []
        while stack:
            unique_id = stack.pop()
            if unique_id in self.pendingNodes:
                continue
            self.pendingNodes[unique_id] = True
            self.blockCount[unique_id] = 0
            self.blocking[unique_id] = {}
            inputs = self.dynprompt.get_node(unique_id)["inputs"]
            for input_name, value in inputs.items():
                if not is_link(value):
                    continue
                from_node_id, from_socket = value
                if subgraph_nodes is not None and from_node_id not in subgraph_nodes:
                    continue
                _, _, info = self.get_input_info(unique_id, input_name)
                is_lazy = bool(info) and bool(info.get("lazy"))
                if (include_lazy or not is_lazy) and not self.is_cached(from_node_id):
                    stack.append(from_node_id)
                    links.append((from_node_id, from_socket, unique_id))
        for link in links:
            self.add_strong_link(*link)

    def add_external_block(self, node_id: str) -> Callable[[], None]:
        """Block `node_id` until the returned function is called (async work in flight)."""
        assert node_id in self.blockCount, "Can't add external block to a node that isn't pending"
        self.externalBlocks += 1
        self.blockCount[node_id] += 1

        def unblock() -> None:
            self.externalBlocks -= 1
            self.blockCount[node_id] -= 1
            self.unblockedEvent.set()

        return unblock

    def is_cached(self, node_id: str) -> bool:
        return False

    def get_ready_nodes(self) -> list[str]:
        return [node_id for node_id in self.pendingNodes if self.blockCount[node_id] == 0]

    def pop_node(self, unique_id: str) -> None:
        del self.pendingNodes[unique_id]
        for blocked in self.blocking[unique_id]:
            self.blockCount[blocked] -= 1
        del self.blocking[unique_id]

    def is_empty(self) -> bool:
        return len(self.pendingNodes) == 0


class ExecutionList(TopologicalSort):
    """The topological dissolve of the graph; a staged node may be put back with new dependencies."""

    def __init__(self, dynprompt: DynamicPrompt, output_cache: Any, class_of: Callable[[str], type]):
        super().__init__(dynprompt, class_of)
        self.output_cache = output_cache
        self.staged_node_id: str | None = None

    def is_cached(self, node_id: str) -> bool:
        return self.output_cache.get(node_id) is not None

    async def stage_node_execution(self) -> tuple[str | None, dict | None, Exception | None]:
        assert self.staged_node_id is None
        if self.is_empty():
            return None, None, None
        available = self.get_ready_nodes()
        while not available and self.externalBlocks > 0:
            await self.unblockedEvent.wait()
            self.unblockedEvent.clear()
            available = self.get_ready_nodes()
        if not available:
            cycled = self.get_nodes_in_cycle()
            # Static cycles never get here (validation refuses them), so blame the expansion that made it.
            blamed = cycled[0]
            for node_id in cycled:
                display = self.dynprompt.get_display_node_id(node_id)
                if display != node_id:
                    blamed = display
                    break
            ex = DependencyCycleError("Dependency cycle detected")
            return (
                None,
                {
                    "node_id": blamed,
                    "exception_message": str(ex),
                    "exception_type": "graph.DependencyCycleError",
                    "traceback": [],
                    "current_inputs": [],
                },
                ex,
            )
        self.staged_node_id = self.ux_friendly_pick_node(available)
        return self.staged_node_id, None, None

    def _is_output(self, node_id: str) -> bool:
        return getattr(self.node_class(node_id), "OUTPUT_NODE", False) is True

    def _is_async(self, node_id: str) -> bool:
        cls = self.node_class(node_id)
        return inspect.iscoroutinefunction(getattr(cls, cls.FUNCTION))

    def ux_friendly_pick_node(self, node_list: list[str]) -> str:
        """Output and async nodes first (previews appear early; async work overlaps), then their feeders."""
        for node_id in node_list:
            if self._is_output(node_id) or self._is_async(node_id):
                return node_id
        for node_id in node_list:
            if any(self._is_output(b) for b in self.blocking[node_id]):
                return node_id
        for node_id in node_list:
            for b in self.blocking[node_id]:
                if any(self._is_output(b2) for b2 in self.blocking[b]):
                    return node_id
        return node_list[0]

    def unstage_node_execution(self) -> None:
        assert self.staged_node_id is not None
        self.staged_node_id = None

    def complete_node_execution(self) -> None:
        self.pop_node(self.staged_node_id)
        self.staged_node_id = None

    def get_nodes_in_cycle(self) -> list[str]:
        """Peel off nodes with no blockers until only the cycle (and what it blocks... none) remains."""
        blocked_by: dict[str, set[str]] = {node_id: set() for node_id in self.pendingNodes}
        for src, targets in self.blocking.items():
            for dst, sockets in targets.items():
                if any(sockets.values()):
                    blocked_by[dst].add(src)
        free = [n for n, b in blocked_by.items() if not b]
        while free:
            for node_id in free:
                del blocked_by[node_id]
                for others in blocked_by.values():
                    others.discard(node_id)
            free = [n for n, b in blocked_by.items() if not b]
        return list(blocked_by)
