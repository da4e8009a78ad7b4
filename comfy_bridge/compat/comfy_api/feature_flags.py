"""`comfy_api.feature_flags`: what the server and each websocket client said they support (the
`feature_flags` message a client sends first). Reads the running server's state."""
from __future__ import annotations

from typing import Any


def get_connection_feature(sockets_metadata: dict | None, sid: str, feature_name: str, default: Any = False) -> Any:
    """The value client `sid` gave for `feature_name` (`default` for an unknown client or flag)."""
    if not sockets_metadata or sid not in sockets_metadata:
        return default
    return sockets_metadata[sid].get("feature_flags", {}).get(feature_name, default)


def supports_feature(sockets_metadata: dict | None, sid: str, feature_name: str, force: bool = True) -> bool:
    """Whether client `sid` said it supports `feature_name`; `force` when that cannot be known."""
    if sockets_metadata is None or "__unimplemented" in sockets_metadata:
        return force
    return get_connection_feature(sockets_metadata, sid, feature_name, False) is True


def get_server_features() -> dict[str, Any]:
    """The flags this server announces (as a copy)."""
    from comfy_bridge.compat.server import PromptServer
    server = PromptServer.instance
    if server is not None and hasattr(server, "feature_flags"):
        return dict(server.feature_flags())
    return {}   # no server running (a script or test importing packs): nothing is announced
