"""Settings of the protocol server; the CLI fills them from ComfyUI's flags."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodes.workspace import Workspace

# 8 MiB holds the largest UI workflows (the web UI sends the graph beside the prompt) many times over.
DEFAULT_MAX_PROMPT_BYTES = 8 * 1024 * 1024
# CLIP encodes a text 77 tokens at a time, and the sampler then attends over every chunk at every
# step: cost grows linearly with the text (2 MB cost 109 s of CPU). 100,000 characters (about 330
# chunks, ~5 s of CLIP on that CPU) is far beyond any written prompt yet keeps one prompt bounded.
# Defined beside the text nodes, which check their output against it when no server bound a limit.
from nodes.text_limits import DEFAULT_MAX_TEXT_CHARS  # noqa: E402


@dataclass
class ServerConfig:
    listen: str = "127.0.0.1"  # comma-separated addresses, one TCP site each (ComfyUI's --listen)
    port: int = 8188
    workspace: Workspace | Path | str | None = None  # None: nodes.workspace.active()
    enable_cors_header: str | None = None  # origins ("*" for any), comma separated: CORS for them
    allowed_hosts: tuple[str, ...] = ()  # Host names served besides IPs, loopback and --listen names
    max_upload_size: float = 100.0  # MB; request bodies above it get 413
    # A prompt's body and the longest string in its nodes (None: no limit); over either, POST /prompt
    # answers 413 naming the limit. A hosted tenant's own limits replace these defaults.
    max_prompt_bytes: int | None = DEFAULT_MAX_PROMPT_BYTES
    max_text_chars: int | None = DEFAULT_MAX_TEXT_CHARS
    front_end_root: Path | str | None = None  # None: the comfyui_frontend_package's static folder
    multi_user: bool = False  # per-user data chosen by the comfy-user header
    cache_type: str = "classic"  # "classic" | "lru" | "none", handed to PromptExecutor
    cache_size: int = 0
    tls_keyfile: str | None = None
    tls_certfile: str | None = None
    enable_compress_response_body: bool = False
    default_hashing_function: str = "sha256"  # upload de-duplication
    disable_assets: bool = False  # --disable-assets: /api/assets answers 503 and the web UI is not told of it
    preview_size: int = 512
    disable_custom_nodes: bool = False  # --disable-all-custom-nodes
    whitelist_custom_nodes: list[str] = field(default_factory=list)  # loaded even when disabled
    extra_custom_node_dirs: tuple[Path, ...] = field(default_factory=tuple)
    # Engine settings carried for the executor and nodes (not used by the HTTP layer itself).
    disable_metadata: bool = False
    preview_method: str = "none"
    dont_print_server: bool = False
    quick_test_for_ci: bool = False  # start up, then exit (ComfyUI's --quick-test-for-ci)
    cluster_head: Any = None  # the cluster.control.head.Head serving ModelFns (None: in-process)
    concurrent_prompts: int = 1  # orchestrators running prompts at once (1: ComfyUI's one at a time)
    # Hosted service (comfy_bridge.tenancy): the SQLite file of the durable queue, history, tenants and
    # keys (True: <workspace>/comfy_cluster.sqlite3; None: in-memory single-user server).
    state_db: Path | str | bool | None = None
    insecure_open: bool = False  # allow a non-loopback address with no tenant configured
    scheduler: Any = None  # the cluster head: receives each tenant's fair-share weight

    @property
    def max_upload_bytes(self) -> int:
        return round(self.max_upload_size * 1024 * 1024)

    @property
    def addresses(self) -> list[str]:
        return [a.strip() for a in self.listen.split(",") if a.strip()]

    def resolve_workspace(self) -> Workspace:
        from nodes import workspace as ws_mod

        if self.workspace is None:
            return ws_mod.active()
        if isinstance(self.workspace, Workspace):
            return self.workspace
        return Workspace(Path(self.workspace)).create()
