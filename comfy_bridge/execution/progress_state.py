"""Per-prompt node progress (`progress_state` messages) and the ProgressBar hook (`progress` + previews).

Node states go pending -> running -> finished; every change sends the state of all non-pending nodes.
The registry of the running prompt is a context variable, so tasks and worker threads of that prompt
find it, and a module-level fallback serves code that runs outside any prompt context.
"""

from __future__ import annotations

import contextvars
import threading
from typing import Any

from comfy_bridge.compat.protocol import BinaryEventTypes
from comfy_bridge.execution.graph import DynamicPrompt


def supports_preview_metadata(server: Any, client_id: str | None) -> bool:
    meta = getattr(server, "sockets_metadata", None) or {}
    flags = (meta.get(client_id) or {}).get("feature_flags") or {}
    return bool(flags.get("supports_preview_metadata", False))


class ProgressRegistry:
    def __init__(self, prompt_id: str, dynprompt: DynamicPrompt, server: Any = None):
        self.prompt_id = prompt_id
        self.dynprompt = dynprompt
        self.server = server
        self.nodes: dict[str, dict] = {}
        # Each progress_state carries every non-pending node; keep those entries ready so a message costs
        # one dict copy. Entries are replaced, never mutated, so messages already handed out stay intact.
        self.public: dict[str, dict] = {}
        self.lock = threading.RLock()  # sync nodes report from worker threads

    def _entry(self, node_id: str) -> dict:
        if node_id not in self.nodes:
            self.nodes[node_id] = {"state": "pending", "value": 0, "max": 1}
        return self.nodes[node_id]

    def _node_ids(self, node_id: str) -> dict:
        return {
            "display_node_id": self.dynprompt.get_display_node_id(node_id),
            "parent_node_id": self.dynprompt.get_parent_node_id(node_id),
            "real_node_id": self.dynprompt.get_real_node_id(node_id),
        }

    def _send_state(self, node_id: str) -> None:
        s = self.nodes[node_id]
        self.public[node_id] = {
            "value": s["value"],
            "max": s["max"],
            "state": s["state"],
            "node_id": node_id,
            "prompt_id": self.prompt_id,
            **self._node_ids(node_id),
        }
        if self.server is not None:
            self.server.send_sync(
                "progress_state", {"prompt_id": self.prompt_id, "nodes": dict(self.public)}, self.server.client_id
            )

    def start_progress(self, node_id: str) -> None:
        with self.lock:
            entry = self._entry(node_id)
            entry.update(state="running", value=0.0, max=1.0)
            self._send_state(node_id)

    def update_progress(self, node_id: str, value: float, max_value: float, image: Any = None) -> None:
        with self.lock:
            entry = self._entry(node_id)
            entry.update(state="running", value=value, max=max_value)
            self._send_state(node_id)
            if (
                image is not None
                and self.server is not None
                and supports_preview_metadata(self.server, self.server.client_id)
            ):
                metadata = {"node_id": node_id, "prompt_id": self.prompt_id, **self._node_ids(node_id)}
                self.server.send_sync(
                    BinaryEventTypes.PREVIEW_IMAGE_WITH_METADATA, (*image, metadata), self.server.client_id
                )

    def finish_progress(self, node_id: str) -> None:
        with self.lock:
            entry = self._entry(node_id)
            entry.update(state="finished", value=entry["max"])
            self._send_state(node_id)


_current: contextvars.ContextVar[ProgressRegistry | None] = contextvars.ContextVar("progress_registry", default=None)
_last: ProgressRegistry | None = None


def set_progress_state(registry: ProgressRegistry) -> contextvars.Token:
    global _last
    _last = registry
    return _current.set(registry)


def restore_progress_state(token: contextvars.Token) -> None:
    """Undo the `set_progress_state` call that returned `token`."""
    _current.reset(token)


def get_progress_state() -> ProgressRegistry:
    registry = _current.get() or _last
    if registry is None:
        registry = ProgressRegistry("", DynamicPrompt({}))
    return registry


def make_progress_hook(server: Any, registry: ProgressRegistry, node_id: str):
    """The ProgressBar hook of one node: registry update, `progress` message, legacy preview frame."""
    from nodes import progress

    def hook(value: float, total: float, preview: Any = None) -> None:
        progress.throw_if_interrupted()
        registry.update_progress(node_id, value, total, preview)
        server.send_sync(
            "progress",
            {"value": value, "max": total, "prompt_id": registry.prompt_id, "node": node_id},
            server.client_id,
        )
        if preview is not None and not supports_preview_metadata(server, server.client_id):
            server.send_sync(BinaryEventTypes.PREVIEW_IMAGE, tuple(preview), server.client_id)

    return hook
