"""The ComfyUI protocol server: `PromptServer` (what node packs reach as PromptServer.instance),
`create_app`, and the start-up functions the CLI calls.

Threading follows ComfyUI: the aiohttp loop serves HTTP and websockets and runs a publish loop
that drains the outgoing message queue; one worker thread executes prompts one at a time.
`send_sync` may be called from any thread.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import inspect
import logging
import signal
import ssl
import sys
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import aiohttp
from aiohttp import web

from comfy_bridge.compat.protocol import BinaryEventTypes
from comfy_bridge.node_replace import node_replace_manager
from nodes import workspace as workspace_mod

from . import (
    assets,
    cluster_stats,
    frontend,
    history,
    internal,
    jobs,
    model_manager,
    node_replacements,
    object_info,
    prompt,
    queue,
    settings,
    subgraphs,
    system,
    upload,
    userdata,
    view,
    websocket,
)
from .config import ServerConfig
from .middleware import cache_control, compress_body, undecodable_body
from .prompt_queue import PromptQueue
from .userdata import UserManager
from .web_security import WebSecurity
from .worker import QueueWorker

log = logging.getLogger(__name__)

Validator = Callable[..., Awaitable[tuple]]
ExecutorFactory = Callable[["PromptServer"], Any]

SERVER_KEY: web.AppKey = web.AppKey("comfy_server", object)

# Route families in registration order; each module's add_routes(routes, server) adds its routes.
ROUTE_MODULES = (
    websocket,
    frontend,
    system,
    view,
    upload,
    prompt,
    queue,
    history,
    object_info,
    jobs,
    userdata,
    settings,
    subgraphs,
    model_manager,
    cluster_stats,
    assets,
    node_replacements,
)


class PromptServer:
    """ComfyUI's server object; `PromptServer.instance` is what node packs use."""

    instance: PromptServer | None = None

    def __init__(
        self,
        config: ServerConfig,
        registry: Any = None,
        executor_factory: ExecutorFactory | None = None,
        validate: Validator | None = None,
    ):
        PromptServer.instance = self
        self.config = config
        self.workspace = workspace_mod.activate(self.open_workspace())
        self.registry = registry
        self._executor_factory = executor_factory
        self._validate = validate
        self.routes = web.RouteTableDef()
        self.sockets: MutableMapping[str, web.WebSocketResponse] = self.make_socket_map()
        self.sockets_metadata: MutableMapping[str, dict] = self.make_socket_map()
        self.client_id: str | None = None
        self.last_node_id: str | None = None
        self.last_prompt_id: str | None = None
        self.number = 0
        self.on_prompt_handlers: list[Callable[[dict], dict]] = []
        self.supports = ["custom_nodes_from_web"]
        self.node_replace_manager = node_replace_manager()  # ComfyUI's attribute; packs' registrations land here
        self.prompt_queue = self.make_prompt_queue()
        self.user_manager = self.make_user_manager()
        self.web_root = frontend.resolve_web_root(config.front_end_root)
        self.loop: asyncio.AbstractEventLoop | None = _running_loop()
        self.messages: asyncio.Queue | None = None
        self.worker = QueueWorker(self, config.concurrent_prompts)
        self.log_buffer = internal.LogBuffer(self)
        # Host and Origin checks (and CORS) wrap everything, authentication included.
        self.web_security = WebSecurity(config)
        middlewares = [self.web_security.middleware, undecodable_body, *self.first_middlewares(), cache_control]
        if config.enable_compress_response_body:
            middlewares.append(compress_body)
        self.app = web.Application(client_max_size=config.max_upload_bytes, middlewares=middlewares)
        self.app[SERVER_KEY] = self
        for module in ROUTE_MODULES:
            module.add_routes(self.routes, self)
        self.app.on_startup.append(self._on_startup)
        self.app.on_cleanup.append(self._on_cleanup)
        _share_with_compat(self)

    # -- component hooks: the hosted server (comfy_bridge.tenancy) swaps these ---------------
    def open_workspace(self) -> workspace_mod.Workspace:
        return self.config.resolve_workspace()

    def make_prompt_queue(self) -> PromptQueue:
        return PromptQueue(self.queue_updated)

    def make_user_manager(self) -> UserManager:
        return UserManager(self.workspace.user_dir, self.config.multi_user)

    def make_socket_map(self) -> MutableMapping:
        """The mapping from client id to socket (and to its metadata): one namespace here."""
        return {}

    def all_sockets(self) -> list[web.WebSocketResponse]:
        """Every connected socket, whoever it belongs to (shutdown closes them all)."""
        return list(self.sockets.values())

    def first_middlewares(self) -> list:
        """Middlewares that run before all others (authentication)."""
        return []

    # -- engine hooks -------------------------------------------------------------------
    async def validate(self, prompt_id: str, prompt_dict: dict, targets: list[str] | None) -> tuple:
        if self._validate is None:
            from comfy_bridge.validation import validate_prompt

            self._validate = validate_prompt
        return await self._validate(self.registry, prompt_id, prompt_dict, targets)

    def make_executor(self, sink: Any = None) -> Any:
        """An engine whose messages go through `sink` (the server itself, or one orchestrator's sink)."""
        sink = self if sink is None else sink
        if self._executor_factory is not None:
            return self._executor_factory(sink)
        from comfy_bridge.execution import PromptExecutor

        return PromptExecutor(self.registry, sink, cache_type=self.config.cache_type, cache_size=self.config.cache_size)

    # -- ComfyUI's PromptServer surface used by node packs ---------------------------
    def add_on_prompt_handler(self, handler: Callable[[dict], dict]) -> None:
        self.on_prompt_handlers.append(handler)

    def trigger_on_prompt(self, json_data: dict) -> dict:
        for handler in self.on_prompt_handlers:
            try:
                json_data = handler(json_data)
            except Exception:
                log.exception("on_prompt handler %r failed", handler)
        return json_data

    def prompt_limits(self, request: web.Request) -> tuple[int | None, int | None]:
        """(max_prompt_bytes, max_text_chars) for a POST /prompt; None: no limit."""
        return self.config.max_prompt_bytes, self.config.max_text_chars

    def max_text_chars_for_run(self) -> int | None:
        """The text limit that the prompt the calling queue worker takes on runs under (text nodes
        check their output against it); None: no limit."""
        return self.config.max_text_chars

    def get_queue_info(self) -> dict:
        return {"exec_info": {"queue_remaining": self.prompt_queue.get_tasks_remaining()}}

    def queue_updated(self) -> None:
        self.send_sync("status", {"status": self.get_queue_info()})

    def feature_flags(self) -> dict:
        # `assets`: the web UI reads models, inputs and outputs through /api/assets (assets.py), whose model
        # records carry model_type:<folder> tags, as today's ComfyUI advertises. `node_replacements`: the web UI
        # reads /node_replacements (node_replacements.py) and offers swapping retired nodes.
        return {
            "supports_preview_metadata": True,
            "max_upload_size": self.config.max_upload_bytes,
            "assets": not self.config.disable_assets,
            "supports_model_type_tags": True,
            "node_replacements": True,
        }

    def supports_feature(self, sid: str | None, feature: str) -> bool:
        """Whether client `sid` negotiated `feature` (e.g. supports_preview_metadata)."""
        meta = self.sockets_metadata.get(sid) if sid is not None else None
        return bool(meta and meta.get("feature_flags", {}).get(feature))

    def send_sync(self, event: str | int, data: Any, sid: str | None = None) -> None:
        """Queue a message for the publish loop; safe from any thread."""
        loop, messages = self.loop, self.messages
        if loop is None or messages is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(messages.put_nowait, (event, data, sid))
        except RuntimeError:  # loop closed between the check and the call (shutdown)
            pass

    def send_progress_text(self, text: str, node_id: str, sid: str | None = None) -> None:
        self.send_sync(BinaryEventTypes.TEXT, {"text": text, "node_id": node_id}, sid)

    def _targets(self, sid: str | None) -> list[tuple[str, web.WebSocketResponse]]:
        """The sockets a message for `sid` (None: everyone) goes to."""
        return (
            list(self.sockets.items()) if sid is None else ([(sid, self.sockets[sid])] if sid in self.sockets else [])
        )

    async def send(self, event: str | int, data: Any, sid: str | None = None) -> None:
        targets = self._targets(sid)
        if not targets:
            return
        if isinstance(event, int):
            await self._send_binary(event, data, targets)
        else:
            for _, ws in targets:
                await _send_safely(ws.send_json, {"type": event, "data": data})

    async def send_json(self, event: str, data: Any, sid: str | None = None) -> None:
        await self.send(event, data, sid)

    async def send_bytes(self, event: int, data: bytes, sid: str | None = None) -> None:
        await self.send(event, bytes(data), sid)

    async def _send_binary(self, event: int, data: Any, targets: list[tuple[str, web.WebSocketResponse]]) -> None:
        if event == BinaryEventTypes.TEXT and isinstance(data, dict):
            for target_sid, ws in targets:
                pid = (
                    self.last_prompt_id
                    if self.supports_feature(target_sid, "supports_progress_text_metadata")
                    else None
                )
                await _send_safely(ws.send_bytes, websocket.text_frame(data["node_id"], data["text"], pid))
            return
        if isinstance(data, (bytes, bytearray, memoryview)):
            message = websocket.frame(event, bytes(data))
            for _, ws in targets:
                await _send_safely(ws.send_bytes, message)
            return
        if event == BinaryEventTypes.PREVIEW_IMAGE_WITH_METADATA:
            # A legacy client (no supports_preview_metadata) cannot parse type 4: give it type 1.
            preview, metadata = websocket.split_preview_with_metadata(data)
            plain = rich = None
            for target_sid, ws in targets:
                if self.supports_feature(target_sid, "supports_preview_metadata"):
                    rich = rich or websocket.preview_metadata_frame(preview, metadata)
                    await _send_safely(ws.send_bytes, rich)
                else:
                    plain = plain or websocket.preview_frame(preview)
                    await _send_safely(ws.send_bytes, plain)
            return
        if event in (BinaryEventTypes.PREVIEW_IMAGE, BinaryEventTypes.UNENCODED_PREVIEW_IMAGE):
            message = websocket.preview_frame(tuple(data))
            for _, ws in targets:
                await _send_safely(ws.send_bytes, message)
            return
        raise TypeError(f"binary event {event} needs bytes, got {type(data).__name__}")

    async def publish_loop(self) -> None:
        while True:
            event, data, sid = await self.messages.get()
            try:
                await self.send(event, data, sid)
            except Exception:
                log.exception("failed to send %s", event)

    # -- lifecycle ------------------------------------------------------------------------
    def add_routes(self) -> None:
        """Freeze the route table into the app: /internal, the /api mirror, then static routes."""
        self.app.add_subapp("/internal", internal.make_app(self))
        api_routes = web.RouteTableDef()
        for route in self.routes:
            if isinstance(route, web.RouteDef):
                api_routes.route(route.method, "/api" + route.path)(route.handler, **route.kwargs)
        self.app.add_routes(api_routes)
        self.app.add_routes(self.routes)
        frontend.add_static_routes(self.app, self)

    async def _on_startup(self, app: web.Application) -> None:
        self.loop = asyncio.get_running_loop()
        self.messages = asyncio.Queue()
        self._publisher = asyncio.create_task(self.publish_loop())
        self.log_buffer.install()
        self.worker.start()

    async def _on_cleanup(self, app: web.Application) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.worker.stop)
        self.log_buffer.uninstall()
        self._publisher.cancel()
        for ws in self.all_sockets():
            await ws.close()
        _release_compat(self)


async def _send_safely(send: Callable[[Any], Awaitable[None]], message: Any) -> None:
    try:
        await send(message)
    except (aiohttp.ClientError, ConnectionError, RuntimeError) as err:
        log.warning("send error: %s", err)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _share_with_compat(server: PromptServer) -> None:
    """Node packs do `from server import PromptServer; PromptServer.instance...`: when the compat
    `server` module has its own PromptServer class, point its .instance at this server."""
    for name in ("server", "comfy_bridge.compat.server"):
        module = sys.modules.get(name)
        if module is None and name.startswith("comfy_bridge."):
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
        cls = getattr(module, "PromptServer", None)
        if cls is not None and cls is not PromptServer:
            cls.instance = server


def _release_compat(server: PromptServer) -> None:
    """A stopped server's app is frozen: packs loaded after it (another registry in the same process) get the
    stub that collects their routes and hooks, as before any server existed."""
    if PromptServer.instance is server:
        PromptServer.instance = None
    module = sys.modules.get("comfy_bridge.compat.server")
    cls = getattr(module, "PromptServer", None)
    if cls is not None and cls is not PromptServer and cls.instance is server:
        cls.instance = cls()


def _load_registry(server: PromptServer) -> Any:
    try:
        from comfy_bridge import compat

        compat.install()
        _share_with_compat(server)
    except ImportError:
        log.warning("comfy_bridge.compat is unavailable; custom nodes cannot import ComfyUI modules")
    from comfy_bridge.registry import build_registry

    config = server.config
    kwargs: dict[str, Any] = {
        "extra_custom_node_dirs": config.extra_custom_node_dirs,
        "load_custom_nodes": not config.disable_custom_nodes,
    }
    if config.whitelist_custom_nodes and "whitelist" in inspect.signature(build_registry).parameters:
        kwargs["whitelist"] = config.whitelist_custom_nodes
    return build_registry(server.workspace, **kwargs)


def create_app(
    config: ServerConfig,
    *,
    registry: Any = None,
    executor_factory: ExecutorFactory | None = None,
    validate: Validator | None = None,
) -> web.Application:
    """Build the server: PromptServer first (so custom nodes find PromptServer.instance and add routes
    while they load), then the node registry, then the frozen route table."""
    server_class = PromptServer
    if config.state_db is not None:  # durable queue and history, tenants (comfy_bridge.tenancy)
        from comfy_bridge.tenancy.server import TenantPromptServer as server_class
    server = server_class(config, registry=registry, executor_factory=executor_factory, validate=validate)
    if server.registry is None:
        server.registry = _load_registry(server)
    server.add_routes()
    return server.app


def _ssl_context(config: ServerConfig) -> ssl.SSLContext | None:
    if not (config.tls_keyfile and config.tls_certfile):
        return None
    ctx = ssl.SSLContext(protocol=ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certfile=config.tls_certfile, keyfile=config.tls_keyfile)
    return ctx


async def start_server(config: ServerConfig, app: web.Application | None = None, **engine: Any) -> web.AppRunner:
    """Start listening on every address of config.listen; returns the runner (await runner.cleanup())."""
    app = app if app is not None else create_app(config, **engine)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    ctx = _ssl_context(config)
    scheme = "https" if ctx else "http"
    for address in config.addresses:
        await web.TCPSite(runner, address, config.port, ssl_context=ctx).start()
        if not config.dont_print_server:
            shown = f"[{address}]" if ":" in address else address
            log.info("To see the GUI go to: %s://%s:%s", scheme, shown, config.port)
    return runner


async def until_stop_signal() -> None:
    """Return on the first SIGINT (Ctrl-C) or SIGTERM (a service manager's stop), so the caller stops
    gracefully: the running prompt interrupted, executors shut down, shared memory and sockets removed.
    A second signal takes the default path (SIGINT raises KeyboardInterrupt, SIGTERM kills) for an
    operator who will not wait. Off the main thread (a server embedded in a test) signals are not ours
    to take: wait for cancellation."""
    if threading.current_thread() is not threading.main_thread():
        await asyncio.Event().wait()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signals = (signal.SIGINT, signal.SIGTERM)

    def on_signal(signum: int) -> None:
        log.info("%s received: stopping (send it again to stop at once)", signal.Signals(signum).name)
        for s in signals:
            loop.remove_signal_handler(s)
        stop.set()

    for s in signals:
        loop.add_signal_handler(s, on_signal, s)
    try:
        await stop.wait()
    finally:
        for s in signals:
            loop.remove_signal_handler(s)


def run_server(config: ServerConfig, **engine: Any) -> None:
    """Serve until SIGINT (Ctrl-C) or SIGTERM, then stop gracefully; with quick_test_for_ci, stop right
    after start-up."""

    async def main() -> None:
        runner = await start_server(config, **engine)
        # Everything loaded so far (torch, the nodes, the registry) lives as long as the server: moved out
        # of the collector's reach, a full collection no longer walks it and stalls every request. `serve`
        # starts with the collector off (comfy_bridge.cli.serve): it runs from here on.
        gc.freeze()
        gc.enable()
        try:
            if not config.quick_test_for_ci:
                await until_stop_signal()
        finally:
            await runner.cleanup()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:  # a second Ctrl-C while stopping
        pass
