"""`comfy_api.feature_flags`: what the server and each websocket client said they support (the
`feature_flags` message a client sends first).

SERVER_FEATURE_FLAGS is ComfyUI's module-level dict that packs add their own flags to (ComfyUI-Manager sets
`extension.manager.supports_csrf_post`); get_server_features answers the running server's flags with those
additions.
"""

from __future__ import annotations

import copy
from typing import Any

SERVER_FEATURE_FLAGS: dict[str, Any] = {"supports_preview_metadata": True}


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


def _merged(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def get_server_features() -> dict[str, Any]:
    """The running server's flags with what packs added to SERVER_FEATURE_FLAGS (a copy)."""
    from comfy_bridge.compat.server import PromptServer

    server = PromptServer.instance
    announced = dict(server.feature_flags()) if hasattr(server, "feature_flags") else {}
    return copy.deepcopy(_merged(announced, SERVER_FEATURE_FLAGS))
