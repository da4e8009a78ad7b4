"""Running core nodes straight from a test: one node by its class name, in a workspace of its own that holds the
tiny demo files the test module needs."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nodes.workspace import Workspace


async def call_node(name: str, **inputs: Any) -> Any:
    """The outputs of core node class NAME's function on `inputs` (awaited when the node is async)."""
    import nodes

    node = nodes.NODE_CLASS_MAPPINGS[name]()
    result = getattr(node, node.FUNCTION)(**inputs)
    return await result if inspect.isawaitable(result) else result


def active_workspace(root: Path, *builders: Callable[[Path], object]) -> Iterator[Workspace]:
    """For a fixture to `yield from`: a fresh workspace at `root`, active, whose models folder each of `builders`
    (a demo builder: models folder -> files written) fills; the workspace active before is put back afterwards,
    so later modules find the one they had."""
    from nodes import workspace as ws_module

    previous = ws_module._active
    ws = ws_module.activate(ws_module.Workspace(root).create())
    for build in builders:
        build(ws.models_dir)
    yield ws
    ws_module._active = previous
