"""Graph building blocks shared by the engine and node packs: links, blockers and GraphBuilder.

Node packs reach these through `comfy_execution.graph_utils` (see comfy_bridge.compat).
"""

from __future__ import annotations

import contextvars
from typing import Any


def is_link(obj: Any) -> bool:
    """A link is exactly `[node_id: str, output_index: int|float]` (a JSON list, not a tuple)."""
    return isinstance(obj, list) and len(obj) == 2 and isinstance(obj[0], str) and isinstance(obj[1], (int, float))


class ExecutionBlocker:
    """An output value that stops every consumer's call for that item.

    With a message the consumer reports an `execution_error` (and the prompt carries on); with None it
    is silent.
    """

    def __init__(self, message: str | None):
        self.message = message


class _PrefixState:
    """Where GraphBuilder ids start: `<node>.<call index>.<graph index>.`; the graph index grows per builder."""

    def __init__(self, root: str = "", call_index: int = 0, graph_index: int = 0):
        self.root, self.call_index, self.graph_index = root, call_index, graph_index


# A context variable rather than class state: concurrently running async nodes (and sync nodes in worker
# threads) each see the prefix of their own call. Outside any node call the one default counter is shared, as
# ComfyUI's class state is.
_SHARED_PREFIX = _PrefixState()
_prefix: contextvars.ContextVar[_PrefixState] = contextvars.ContextVar("graph_builder_prefix", default=_SHARED_PREFIX)


class GraphBuilder:
    """Builds an API-format graph, e.g. for node expansion (`{"result": ..., "expand": builder.finalize()}`)."""

    def __init__(self, prefix: str | None = None):
        self.prefix = GraphBuilder.alloc_prefix() if prefix is None else prefix
        self.nodes: dict[str, Node] = {}
        self.id_gen = 1

    @classmethod
    def set_default_prefix(cls, prefix_root: str, call_index: int, graph_index: int = 0) -> None:
        _prefix.set(_PrefixState(prefix_root, call_index, graph_index))

    @classmethod
    def alloc_prefix(
        cls, root: str | None = None, call_index: int | None = None, graph_index: int | None = None
    ) -> str:
        state = _prefix.get()
        root = state.root if root is None else root
        call_index = state.call_index if call_index is None else call_index
        graph_index = state.graph_index if graph_index is None else graph_index
        state.graph_index += 1
        return f"{root}.{call_index}.{graph_index}."

    def node(self, class_type: str, id: str | None = None, **kwargs: Any) -> Node:
        if id is None:
            id = str(self.id_gen)
            self.id_gen += 1
        full_id = self.prefix + id
        if full_id not in self.nodes:
            self.nodes[full_id] = Node(full_id, class_type, kwargs)
        return self.nodes[full_id]

    def lookup_node(self, id: str) -> Node | None:
        return self.nodes.get(self.prefix + id)

    def finalize(self) -> dict:
        return {node_id: node.serialize() for node_id, node in self.nodes.items()}

    def replace_node_output(self, node_id: str, index: int, new_value: Any) -> None:
        """Point every input fed by `node_id[index]` at `new_value` (None removes those inputs)."""
        target = self.prefix + node_id
        for node in self.nodes.values():
            for key, value in list(node.inputs.items()):
                if is_link(value) and value[0] == target and value[1] == index:
                    if new_value is None:
                        del node.inputs[key]
                    else:
                        node.inputs[key] = new_value

    def remove_node(self, id: str) -> None:
        del self.nodes[self.prefix + id]


class Node:
    def __init__(self, id: str, class_type: str, inputs: dict):
        self.id = id
        self.class_type = class_type
        self.inputs = inputs
        self.override_display_id: str | None = None

    def out(self, index: int) -> list:
        return [self.id, index]

    def set_input(self, key: str, value: Any) -> None:
        if value is None:
            self.inputs.pop(key, None)
        else:
            self.inputs[key] = value

    def get_input(self, key: str) -> Any:
        return self.inputs.get(key)

    def set_override_display_id(self, override_display_id: str) -> None:
        self.override_display_id = override_display_id

    def serialize(self) -> dict:
        out = {"class_type": self.class_type, "inputs": self.inputs}
        if self.override_display_id is not None:
            out["override_display_id"] = self.override_display_id
        return out


def add_graph_prefix(graph: dict, outputs: Any, prefix: str) -> tuple[dict, tuple]:
    """Prefix every node id of `graph` (and the links in it and in `outputs`) with `prefix`."""

    def relink(value: Any) -> Any:
        return [prefix + value[0], value[1]] if is_link(value) else value

    new_graph = {
        prefix + node_id: {
            "class_type": info["class_type"],
            "inputs": {k: relink(v) for k, v in info.get("inputs", {}).items()},
        }
        for node_id, info in graph.items()
    }
    return new_graph, tuple(relink(o) for o in outputs)
