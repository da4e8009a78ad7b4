"""`TenantPromptServer`: the protocol server of a hosted deployment. Queue, history, tenants and
keys are durable (Store); requests are authenticated and scoped to their tenant; websocket
messages reach only the sockets of the tenant they belong to; each tenant has its own engine
cache and folders. With no tenant configured it serves one user exactly like PromptServer, but
its queue and history survive a restart."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiohttp import web

from comfy_bridge.server.app import PromptServer
from comfy_bridge.server.common import TENANT_KEY, error_body, json_response, over_limit
from comfy_bridge.server.config import ServerConfig
from comfy_bridge.server.prompt_queue import DuplicatePromptId
from nodes.workspace import Workspace

from . import tenant_context as context
from . import v2_install
from .accounting import Accounting
from .auth import Gate
from .quotas import Quotas
from .read_pacing import ReadPacer, paced_route
from .sockets import TenantScoped
from .store import DB_NAME, Store
from .tenant_engines import TenantExecutors
from .tenant_folders import TenantUserManager, TenantWorkspace
from .tenant_queue import TenantQueue

log = logging.getLogger(__name__)


class InsecureListen(RuntimeError):
    """A non-loopback address with no tenant configured (and no --insecure-open)."""


def is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def check_listen(config: ServerConfig, store: Store) -> None:
    exposed = [a for a in config.addresses if not is_loopback(a)]
    if exposed and not store.has_tenants() and not config.insecure_open:
        raise InsecureListen(
            f"refusing to listen on {', '.join(exposed)} with no tenant: anyone who reaches it could run prompts "
            "and read every file. Add one (`comfy-cluster tenants add NAME`, then `tenants key NAME`) or pass "
            "--insecure-open."
        )


def state_path(config: ServerConfig, workspace: Workspace) -> Path:
    return Path(config.state_db) if config.state_db not in (None, True) else workspace.root / DB_NAME


class TenantPromptServer(PromptServer):
    def __init__(self, config: ServerConfig, **engine: Any):
        db_path = state_path(config, config.resolve_workspace())
        self.store = Store(db_path)
        check_listen(config, self.store)
        self.tenant_workspace: TenantWorkspace | None = None
        super().__init__(config, **engine)
        self.number = int(self.store.max_number()) + 1  # new prompts queue after the resumed ones
        self.gate.add_routes(self.app)
        self.app.router.add_get("/cluster/tenants", self.usage_list)
        self.app.router.add_get("/cluster/tenants/{name}/usage", self.usage)
        self.v2 = v2_install.install(self, db_path)  # Comfy API v2 (/api/v2/*), records in the same file
        if self.prompt_queue.resumed:
            log.info("resumed %d prompts that were running when the server stopped", self.prompt_queue.resumed)

    # The worker sets client_id for the prompt it runs; a socket of another tenant reconnecting under
    # that id must not be told which node runs, so the id reads as None outside the prompt's tenant.
    @property
    def client_id(self) -> str | None:
        value, owner = self.__dict__.get("_client", (None, None))
        return value if owner == context.current() else None

    @client_id.setter
    def client_id(self, value: str | None) -> None:
        self.__dict__["_client"] = (value, context.current())

    # -- component hooks ------------------------------------------------------------------
    def open_workspace(self) -> Workspace:
        self.tenant_workspace = TenantWorkspace.wrap(self.config.resolve_workspace())
        return self.tenant_workspace

    def make_prompt_queue(self) -> TenantQueue:
        return TenantQueue(self.store, self.queue_updated)

    def make_user_manager(self) -> TenantUserManager:
        return TenantUserManager(self.tenant_workspace, self.config.multi_user)

    def make_socket_map(self) -> TenantScoped:
        return TenantScoped()

    def all_sockets(self) -> list[web.WebSocketResponse]:
        return self.sockets.every_value()

    def first_middlewares(self) -> list:
        self.quotas = Quotas(
            self.store, self.tenant_workspace.tenant_folders, (self.config.max_prompt_bytes, self.config.max_text_chars)
        )
        self.gate = Gate(self.store, self.quotas)
        self.accounting = Accounting(self.store, self.quotas, lambda: self.config.cluster_head)
        self.read_pacer = ReadPacer()
        return [self.gate.middleware, self._load_tenant_queue]

    @web.middleware
    async def _load_tenant_queue(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """A caller's first request loads its in-memory queue and history in a thread, so that its
        routes read them without touching SQLite on the event loop; its polls of /queue and /history
        are paced (read_pacing). A prompt id the store refuses
        (DuplicatePromptId, decided atomically by its database) is the 409 of whichever route queued it."""
        tenant = request.get(TENANT_KEY)  # None: the single user of a server with no tenant (sees every row)
        if (tenant is not None or not self.gate.active()) and not self.prompt_queue.loaded(tenant):
            await asyncio.to_thread(self.prompt_queue.load, tenant)
        route = paced_route(request.method, request.path)
        if route is not None:
            wait = self.read_pacer.delay((tenant, route))
            if wait > 0:
                await asyncio.sleep(wait)
        try:
            return await handler(request)
        except DuplicatePromptId as err:
            return json_response(error_body("prompt_id_in_use", "prompt_id is already in use", str(err)), status=409)

    def prompt_limits(self, request: web.Request) -> tuple[int | None, int | None]:
        tenant = request.get(TENANT_KEY)
        record = self.gate.tenant(tenant) if tenant is not None else None
        return self.quotas.prompt_limits(record)

    def max_text_chars_for_run(self) -> int | None:
        # the queue worker runs bound to the tenant whose prompt it took
        tenant = context.current()
        return self.quotas.prompt_limits(self.gate.tenant(tenant) if tenant is not None else None)[1]

    def make_executor(self, sink: Any = None) -> Any:
        make = super().make_executor
        return TenantExecutors(lambda: make(sink), on_tenant=self._charge_weight)

    def _charge_weight(self, tenant: str) -> None:
        """The cluster scheduler divides a tenant's vTime by its weight."""
        scheduler = self.config.scheduler
        record = self.store.get_tenant(tenant) if tenant else None
        if scheduler is not None and record is not None:
            scheduler.set_tenant_weight(tenant, record.weight)

    # -- messages: every message belongs to the tenant it was produced for ----------------------
    def queue_updated(self, tenant: str | None = None) -> None:
        """A `status` message with its own queue_remaining to each socket of `tenant`, whose queue
        changed (by default the calling context's tenant: a node pack calls this with no argument);
        to every tenant's sockets only for unscoped changes (the single-user server, or clearing every
        queue). One tenant's queue changing must not tell another tenant anything."""
        v2 = self.__dict__.get("v2")
        if v2 is not None:
            v2.hub.nudge()  # API v2 event streams of queued jobs re-read their queue position
        owner = tenant or context.current()  # "": the single-user rows, whose sockets are unscoped too
        for scope in {owner} if owner is not None else self.sockets.tenants() or {None}:
            with context.scoped(scope):
                super().queue_updated()

    def send_sync(self, event: str | int, data: Any, sid: str | None = None) -> None:
        v2 = self.__dict__.get("v2")
        if v2 is not None:
            v2.observe(event, data, sid)  # an API v2 job's messages feed its event stream
        loop, messages = self.loop, self.messages
        if loop is None or messages is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(messages.put_nowait, (event, data, sid, context.current()))
        except RuntimeError:  # loop closed between the check and the call (shutdown)
            pass

    async def publish_loop(self) -> None:
        while True:
            event, data, sid, tenant = await self.messages.get()
            try:
                with context.scoped(tenant):
                    await self.send(event, data, sid)
            except Exception:
                log.exception("failed to send %s", event)

    # -- API v2 requests under the v1 limits ------------------------------------------------------
    def v2_prompt_refusal(self, request: web.Request, body: bytes) -> web.Response | None:
        """The v2 answer when a job's body is over a limit of the caller (or the server's)."""
        tenant = request.get(TENANT_KEY)
        record = self.gate.tenant(tenant) if tenant is not None else None
        try:
            if record is not None:
                self.quotas.check_prompt_body(record, body, field="workflow")
            else:
                max_bytes, _ = self.prompt_limits(request)
                if max_bytes is not None and len(body) > max_bytes:
                    raise over_limit(413, "max_prompt_bytes", max_bytes, f"prompt is {len(body)} bytes")
        except web.HTTPException as exc:
            return v2_install.refusal(exc)
        return None

    def v2_upload_limit(self, request: web.Request) -> int:
        """The largest upload the caller may send: its own limit where set, else the server's."""
        tenant = request.get(TENANT_KEY)
        record = self.gate.tenant(tenant) if tenant is not None else None
        own = record.max_upload_bytes if record is not None else None
        return min(own, self.config.max_upload_bytes) if own is not None else self.config.max_upload_bytes

    def v2_storage_refusal(self, request: web.Request, size: int) -> web.Response | None:
        tenant = request.get(TENANT_KEY)
        record = self.gate.tenant(tenant) if tenant is not None else None
        if record is None:
            return None
        try:
            self.quotas.check_upload(record, size)
        except web.HTTPException as exc:
            return v2_install.refusal(exc)
        return None

    # -- accounting -----------------------------------------------------------------------
    def _is_admin(self, request: web.Request) -> bool:
        """An admin tenant, or the unauthenticated operator of a server with no tenant."""
        caller = request.get(TENANT_KEY)
        record = self.store.get_tenant(caller) if caller is not None else None
        return caller is None or (record is not None and record.admin)

    async def usage(self, request: web.Request) -> web.Response:
        """GET /cluster/tenants/{name}/usage: for the tenant itself or an admin."""
        name = request.match_info["name"]
        if request.get(TENANT_KEY) != name and not self._is_admin(request):
            return web.json_response({"error": "forbidden"}, status=403)
        tenant = self.store.get_tenant(name)
        if tenant is None:
            return web.json_response({"error": "no such tenant"}, status=404)
        return web.json_response(await asyncio.to_thread(self.accounting.usage, tenant))

    async def usage_list(self, request: web.Request) -> web.Response:
        """GET /cluster/tenants: every tenant's usage for an admin, the caller's own otherwise."""
        if self._is_admin(request):
            rows = await asyncio.to_thread(self.accounting.all_usage)
        else:
            tenant = self.store.get_tenant(request[TENANT_KEY])
            rows = [await asyncio.to_thread(self.accounting.usage, tenant)] if tenant is not None else []
        return web.json_response({"tenants": rows})

    def metric_families(self) -> Iterator[Any]:
        """The per-tenant families /metrics adds to the cluster's (comfy_bridge.server.cluster_stats)."""
        return self.accounting.metric_families()
