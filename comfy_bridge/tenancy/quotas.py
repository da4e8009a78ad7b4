"""Admission checks for a tenant's request: queued prompts, prompt size and node count, upload
size and stored bytes. Over a limit the answer is 429 (come back later) or 413 (too big), in
ComfyUI's error shape with the limit named in the message and in extra_info. The text length of a
prompt is checked by the route (it parses the prompt), with the limits of `prompt_limits`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from comfy_bridge.server.common import over_limit

from .store import Store, Tenant
from .tenant_folders import storage_bytes

UPLOAD_PATHS = ("/upload/image", "/upload/mask")
STORAGE_TTL_S = 2.0


class Quotas:
    def __init__(
        self,
        store: Store,
        folders: Callable[[str], list[Path]],
        prompt_defaults: tuple[int | None, int | None] = (None, None),
    ):
        self.store = store
        self._folders = folders
        self._prompt_defaults = prompt_defaults  # the server's (max_prompt_bytes, max_text_chars)
        self._storage: dict[str, tuple[float, int]] = {}

    def prompt_limits(self, tenant: Tenant | None) -> tuple[int | None, int | None]:
        """(max_prompt_bytes, max_text_chars): the tenant's own where set, else the server's."""
        default_bytes, default_chars = self._prompt_defaults
        if tenant is None:
            return default_bytes, default_chars
        return (
            tenant.max_prompt_bytes if tenant.max_prompt_bytes is not None else default_bytes,
            tenant.max_text_chars if tenant.max_text_chars is not None else default_chars,
        )

    def stored_bytes(self, tenant: str, fresh: bool = False) -> int:
        cached = self._storage.get(tenant)
        if cached is None or fresh or time.monotonic() - cached[0] > STORAGE_TTL_S:
            cached = (time.monotonic(), storage_bytes(self._folders(tenant)))
            self._storage[tenant] = cached
        return cached[1]

    async def check(self, request: web.Request, tenant: Tenant) -> None:
        """Raise the 413/429 for a request over one of `tenant`'s limits."""
        if request.method != "POST":
            return
        path = request.path[4:] if request.path.startswith("/api/") else request.path
        if path == "/prompt":
            await self._check_prompt(request, tenant)
        elif path in UPLOAD_PATHS or path.startswith("/userdata/"):
            await self._check_upload(request, tenant)

    def _check_storage(self, tenant: Tenant, incoming: int = 0) -> None:
        cap = tenant.max_storage_bytes
        if cap is not None:
            # Uploads measure afresh (the previous one may be seconds old); prompts may use the cache.
            used = self.stored_bytes(tenant.name, fresh=incoming > 0)
            if used + incoming > cap:
                raise over_limit(
                    413, "max_storage_bytes", cap, f"storage full: {used} bytes stored, {incoming} more requested"
                )

    async def _check_prompt(self, request: web.Request, tenant: Tenant) -> None:
        self.check_prompt_body(tenant, await request.read())  # aiohttp keeps the body for the handler

    def check_prompt_body(self, tenant: Tenant, body: bytes, field: str = "prompt") -> None:
        """Raise the 413/429 for a prompt body (its graph under `field`: "workflow" in API v2) over a limit."""
        max_bytes, _ = self.prompt_limits(tenant)
        if max_bytes is not None and len(body) > max_bytes:  # before parsing it
            raise over_limit(413, "max_prompt_bytes", max_bytes, f"prompt is {len(body)} bytes")
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: absurd nesting
            return  # the route answers malformed JSON itself
        prompt = data.get(field) if isinstance(data, dict) else None
        if tenant.max_nodes is not None and isinstance(prompt, dict) and len(prompt) > tenant.max_nodes:
            raise over_limit(413, "max_nodes", tenant.max_nodes, f"prompt has {len(prompt)} nodes")
        if tenant.max_queued is not None:
            queued = sum(self.store.queue_counts(tenant.name))
            if queued >= tenant.max_queued:
                raise over_limit(429, "max_queued", tenant.max_queued, f"{queued} prompts already queued or running")
        self._check_storage(tenant)
        # A prompt_id in use is refused by the store's database when the prompt is queued (tenancy.store):
        # a check here, before it, let two tenants posting one id at the same moment both pass.

    async def _check_upload(self, request: web.Request, tenant: Tenant) -> None:
        size = request.content_length
        if size is None:
            size = len(await request.read())
        self.check_upload(tenant, size)

    def check_upload(self, tenant: Tenant, size: int) -> None:
        """Raise the 413 for an upload of `size` bytes over the tenant's upload or storage limit."""
        cap = tenant.max_upload_bytes
        if cap is not None and size > cap:
            raise over_limit(413, "max_upload_bytes", cap, f"upload is {size} bytes")
        self._check_storage(tenant, size)
