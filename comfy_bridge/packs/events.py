"""What a pack node sends while it runs on an executor (progress, `PromptServer.instance.send_sync`
messages) is recorded there and replayed on the head, in order, when the invocation returns."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from nodes import progress

Event = tuple  # ("progress", value, total) | ("send", event, data, sid)


class _RecordingServer:
    """Stands in for PromptServer.instance inside an executor: records messages, answers the ids."""

    def __init__(self, base: Any, events: list[Event], ids: dict[str, Any]) -> None:
        self._base = base
        self._events = events
        self.client_id = ids.get("client_id")
        self.last_node_id = ids.get("node_id")
        self.last_prompt_id = ids.get("prompt_id")

    def send_sync(self, event: Any, data: Any, sid: str | None = None) -> None:
        self._events.append(("send", event, data, sid))

    async def send(self, event: Any, data: Any, sid: str | None = None) -> None:
        self.send_sync(event, data, sid)

    async def send_json(self, event: Any, data: Any, sid: str | None = None) -> None:
        self.send_sync(event, data, sid)

    def send_progress_text(self, text: str, node_id: str, sid: str | None = None) -> None:
        self._events.append(("text", text, node_id, sid))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._base, name)


def _server_classes() -> list[type]:
    found = []
    for name in ("server", "comfy_bridge.compat.server"):
        cls = getattr(sys.modules.get(name), "PromptServer", None)
        if cls is not None and cls not in found:
            found.append(cls)
    return found


@contextlib.contextmanager
def recording(ids: dict[str, Any]) -> Iterator[list[Event]]:
    """Record progress and server messages of the code run inside (executor side)."""
    events: list[Event] = []
    classes = _server_classes()
    saved = [cls.instance for cls in classes]
    for cls, base in zip(classes, saved):
        cls.instance = _RecordingServer(base, events, ids)
    token = progress.set_progress_hook(lambda value, total, preview=None: events.append(("progress", value, total)))
    try:
        yield events
    finally:
        progress.reset_progress_hook(token)
        for cls, base in zip(classes, saved):
            cls.instance = base


def replay(events: list[Event]) -> None:
    """Send recorded events from the head: progress to the running node's hook, messages to the server."""
    servers = [cls.instance for cls in _server_classes() if cls.instance is not None]
    server = servers[0] if servers else None
    for event in events:
        if event[0] == "progress":
            progress.report_progress(event[1], event[2])
        elif event[0] == "send" and server is not None:
            server.send_sync(event[1], event[2], event[3])
        elif event[0] == "text" and server is not None:
            server.send_progress_text(event[1], event[2], event[3])
