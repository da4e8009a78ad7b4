"""Fuzz: hypothesis draws requests against every route of the face (malformed bodies, JSON,
multipart forms, headers, cookies, Origin/Host, query strings, traversal-shaped names and ids),
sent as raw HTTP to a running server, hosted (tenants, keys, cookies) and single-user. No answer
is a 5xx, the server keeps serving and running prompts, and nothing is written outside the
workspace. Bounded: FUZZ_EXAMPLES (default 300) examples per mode, well under a minute."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import threading
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import tenant_nodes as tn
from aiohttp import web
from app_routes import app_routes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from comfy_bridge.registry import NodeRegistry
from comfy_bridge.server import ServerConfig, create_app
from comfy_bridge.server.app import SERVER_KEY
from comfy_bridge.tenancy.keys import split_key
from nodes.image import EmptyImage
from nodes.image_io import LoadImage, SaveImage
from nodes.workspace import Workspace

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "300"))
TRICKY = [
    "..",
    "../..",
    "../../outside/pwn",
    "..%2F..%2Foutside%2Fpwn",
    "%2e%2e%2f",
    "/etc/passwd",
    "C:\\x",
    "..\\..\\outside\\pwn",
    "\x00",
    "%00",
    "a.png",
    "x.png [input]",
    "x.svg",
    "tenants/bob",
    "tenants/../..",
    "~",
    "",
    ".",
    "😀",
    "a" * 300,
    "*",
    "workflows/a.json",
    "comfy.settings.json",
    "alice",
    "bob",
    "admin",
    "-1",
    "0",
    "99999999999999999999",
    "1e309",
    "NaN",
    "null",
    "true",
    "[]",
    "{}",
    "input",
    "output",
    "temp",
    "checkpoints",
    "default",
    "webp;90",
    "jpeg;-5",
    "rgb",
    "a",
    "%",
    "%%",
    "?",
    "#",
    ";",
    "\u202e",
    " ",
]
SEGMENT = st.one_of(
    st.sampled_from(TRICKY),
    st.text(max_size=24),
    st.builds(lambda a, b, c: a + b + c, st.sampled_from(TRICKY), st.text(max_size=6), st.sampled_from(TRICKY)),
)
# The routes come from the app's own router (tests/tenancy/app_routes.py), every method and path, HEADs
# and /api mirrors included; these are sent besides, as methods no route takes.
EXTRA_ROUTES = [("PUT", "/prompt"), ("OPTIONS", "/prompt"), ("DELETE", "/queue")]


def fuzz_routes(app: web.Application) -> list[tuple[str, str]]:
    """(method, template with {} per parameter) of every route of the app, and EXTRA_ROUTES."""
    return [(m, re.sub(r"\{[^}]*\}", "{}", p)) for m, p in app_routes(app)] + EXTRA_ROUTES


QUERY_KEYS = [
    "filename",
    "type",
    "subfolder",
    "preview",
    "channel",
    "max_items",
    "offset",
    "dir",
    "recurse",
    "full_info",
    "split",
    "path",
    "overwrite",
    "clientId",
    "limit",
    "status",
    "sort_by",
    "sort_order",
    "next",
    "workflow_id",
    "x",
]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20) | SEGMENT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
node = st.one_of(
    st.fixed_dictionaries(
        {
            "class_type": st.just("EmptyImage"),
            "inputs": st.fixed_dictionaries(
                {
                    "width": st.integers(-2, 8),
                    "height": st.integers(1, 8),
                    "batch_size": st.just(1),
                    "color": st.integers(0, 99),
                }
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "class_type": st.just("SaveImage"),
            "inputs": st.fixed_dictionaries(
                {"images": st.sampled_from([["1", 0], ["2", 0], ["9", 0], "1", [1, "x"]]), "filename_prefix": SEGMENT}
            ),
        }
    ),
    st.fixed_dictionaries({"class_type": st.just("LoadImage"), "inputs": st.fixed_dictionaries({"image": SEGMENT})}),
    st.fixed_dictionaries({"class_type": st.sampled_from(["TNumber", "Nope", ""]), "inputs": json_values}),
    json_values,
)
prompts = st.fixed_dictionaries(
    {"prompt": st.dictionaries(st.sampled_from(["1", "2", "3", "x"]), node, max_size=3)},
    optional={
        "client_id": SEGMENT,
        "prompt_id": SEGMENT,
        "number": json_values,
        "front": json_values,
        "extra_data": json_values,
        "partial_execution_targets": json_values,
        "delete": json_values,
        "clear": json_values,
        "job_ids": json_values,
        "key": st.sampled_from(["$alice", "$admin", "garbage"]) | SEGMENT,
    },
)
BOUNDARY = "fuzzBOUNDARY"


def _multipart(fields: list[tuple[str, str | None, bytes]]) -> bytes:
    out = b""
    for name, filename, data in fields:
        disp = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename is not None else "")
        out += f"--{BOUNDARY}\r\nContent-Disposition: {disp}\r\n\r\n".encode("utf-8", "replace") + data + b"\r\n"
    return out + f"--{BOUNDARY}--\r\n".encode()


multipart = st.lists(
    st.tuples(
        st.sampled_from(["image", "type", "subfolder", "overwrite", "original_ref", "x"]),
        st.none() | SEGMENT,
        st.binary(max_size=64) | SEGMENT.map(lambda s: s.encode()),
    ),
    max_size=4,
).map(_multipart)
bodies = st.one_of(
    st.none(),
    st.binary(max_size=512),
    json_values.map(lambda v: json.dumps(v).encode()),
    prompts.map(lambda v: json.dumps(v).encode()),
    multipart,
    st.just(b'{"prompt": ' * 2000),
)  # deep nesting
header_value = st.one_of(st.sampled_from(["", "null", "*", "Bearer", "Bearer ", "gzip"]), st.text(max_size=40))


def mostly(usual: st.SearchStrategy, odd: st.SearchStrategy = header_value) -> st.SearchStrategy:
    """`usual` nine times in ten: most requests should get past the gate to the route's own code."""
    return st.sampled_from(range(10)).flatmap(lambda i: odd if i == 9 else usual)  # shrinks towards usual


requests = lambda routes: st.fixed_dictionaries(
    {  # noqa: E731
        "route": st.sampled_from(routes),
        "api": st.booleans(),
        "segments": st.lists(SEGMENT, min_size=3, max_size=3),
        "raw_segments": st.booleans(),
        "query": st.dictionaries(st.sampled_from(QUERY_KEYS) | st.text(max_size=6), SEGMENT, max_size=4),
        "auth": mostly(st.sampled_from(["$alice", "$alice", "$admin", "$cookie", "$none"])),
        "cookie": mostly(st.none(), st.sampled_from(["$session"]) | header_value),
        "content_type": mostly(
            st.none()
            | st.sampled_from(
                [
                    "application/json",
                    "application/x-www-form-urlencoded",
                    "text/plain",
                    f"multipart/form-data; boundary={BOUNDARY}",
                    "multipart/form-data",
                ]
            )
        ),
        "origin": mostly(
            st.sampled_from([None, None, None, "$same"]),
            st.sampled_from(["null", "http://evil.example"]) | header_value,
        ),
        "host": mostly(st.just("$same"), st.sampled_from(["localhost", "evil.example"]) | header_value),
        "extra": mostly(
            st.just({}),
            st.dictionaries(st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12), header_value, max_size=3),
        ),
        "upgrade": mostly(st.just(False), st.just(True)),
        "body": bodies,
    }
)


def _clean(value: str) -> str:
    return value.replace("\r", "").replace("\n", "").replace("\x00", "")


class LiveServer:
    """The server on its own loop and thread, reached over real sockets."""

    def __init__(self, config: ServerConfig, registry: NodeRegistry):
        self.config = config
        self.registry = registry
        self.ready = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(60), "server did not start"

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def start() -> None:
            self.app = create_app(self.config, registry=self.registry)
            self.runner = web.AppRunner(self.app, access_log=None)
            await self.runner.setup()
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]
            self.ready.set()

        self.loop.run_until_complete(start())
        self.loop.run_forever()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)

    def send(self, raw: bytes) -> int:
        """Send one request; the status code of the answer (101 for a websocket, which is closed)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=20) as sock:
            sock.sendall(raw)
            data = b""
            while b"\r\n" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
        return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else -1


def _request(spec: dict, port: int, secrets: dict) -> bytes:
    method, template = spec["route"]
    segs = [quote(s, safe="" if not spec["raw_segments"] else "/%.") for s in spec["segments"]]
    path = template.format(*segs[: template.count("{}")])
    if spec["api"] and not path.startswith("/api/"):
        path = "/api" + path
    if spec["query"]:
        path += "?" + "&".join(f"{quote(k, safe='')}={quote(v, safe='%/')}" for k, v in spec["query"].items())
    same = f"127.0.0.1:{port}"
    headers = {"Host": same if spec["host"] == "$same" else _clean(spec["host"]), "Connection": "close"}
    auth = spec["auth"]
    if auth in ("$alice", "$admin"):
        headers["Authorization"] = "Bearer " + secrets[auth]
    elif auth == "$cookie":
        headers["Cookie"] = "comfy_cluster_session=" + secrets["$session"]
    elif auth != "$none":
        headers["Authorization"] = _clean(auth)
    if spec["cookie"] is not None and "Cookie" not in headers:
        headers["Cookie"] = (
            "comfy_cluster_session=" + secrets["$session"] if spec["cookie"] == "$session" else _clean(spec["cookie"])
        )
    if spec["origin"] is not None:
        headers["Origin"] = f"http://{same}" if spec["origin"] == "$same" else _clean(spec["origin"])
    if spec["content_type"] is not None:
        headers["Content-Type"] = _clean(spec["content_type"])
    for name, value in spec["extra"].items():
        headers.setdefault(name, _clean(value))
    if spec["upgrade"]:
        headers.update(
            {
                "Upgrade": "websocket",
                "Connection": "Upgrade",
                "Sec-WebSocket-Version": "13",
                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
            }
        )
    body = spec["body"] or b""
    for name, value in secrets.items():  # a body may carry a real key (the login form)
        body = body.replace(name.encode(), value.encode())
    if body or method in ("POST", "PUT", "PATCH"):
        headers["Content-Length"] = str(len(body))
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    return head.encode("utf-8", "replace") + body


def _tree(root: Path, skip: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if skip not in p.parents and p != skip}


def _fuzz_registry() -> NodeRegistry:
    registry = NodeRegistry()
    registry.add_builtin({**tn.CLASSES, "EmptyImage": EmptyImage, "SaveImage": SaveImage, "LoadImage": LoadImage})
    return registry


@pytest.mark.parametrize("hosted_mode", [True, False], ids=["hosted", "single-user"])
def test_fuzzed_requests_never_fail_the_server(tmp_path, hosted_mode):
    (tmp_path / "outside").mkdir()
    ws = Workspace(tmp_path / "ws").create()
    (tmp_path / "ws" / "web").mkdir()
    (tmp_path / "ws" / "web" / "index.html").write_text("<html>ui</html>")
    config = ServerConfig(
        workspace=ws,
        state_db=ws.root / "state.sqlite3",
        front_end_root=ws.root / "web",
        max_upload_size=1,
        dont_print_server=True,
    )
    live = LiveServer(config, _fuzz_registry())
    server = live.app[SERVER_KEY]
    secrets = {"$alice": "none", "$admin": "none", "$session": "none"}
    if hosted_mode:
        server.store.add_tenant("alice")
        server.store.add_tenant("admin", admin=True)
        secrets.update({"$alice": server.store.create_key("alice"), "$admin": server.store.create_key("admin")})
        secrets["$session"] = server.store.create_session("alice", split_key(secrets["$alice"])[0], 3600)
        server.gate._active = (0.0, False)
    before = _tree(tmp_path, ws.root)
    failures: list[tuple[int, bytes]] = []
    started = time.monotonic()
    routes = fuzz_routes(live.app)
    assert len(routes) >= 170
    # Every route once with a plain request first (hypothesis then draws among them).
    for method, template in routes:
        spec = {
            "route": (method, template),
            "api": False,
            "segments": ["a.png", "b", "c"],
            "raw_segments": False,
            "query": {"filename": "a.png"},
            "auth": "$alice",
            "cookie": None,
            "content_type": None,
            "origin": None,
            "host": "$same",
            "extra": {},
            "upgrade": False,
            "body": None,
        }
        raw = _request(spec, live.port, secrets)
        status = live.send(raw)
        if status >= 500 or status == -1:
            failures.append((status, raw[:600]))

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=not os.environ.get("FUZZ_RANDOM"),
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(requests(routes))
    def fuzz(spec: dict) -> None:
        raw = _request(spec, live.port, secrets)
        status = live.send(raw)
        if status >= 500 or status == -1:
            failures.append((status, raw[:600]))

    try:
        fuzz()
        assert not failures, "\n\n".join(f"{s}: {r!r}" for s, r in failures[:5])
        assert time.monotonic() - started < 120
        # Still serving, and still running prompts to completion.
        auth = f"Authorization: Bearer {secrets['$alice']}\r\n" if hosted_mode else ""
        prompt = json.dumps({"prompt": tn.prompt(7, prefix="afterfuzz")}).encode()
        raw = (
            f"POST /prompt HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{auth}"
            f"Content-Type: application/json\r\nContent-Length: {len(prompt)}\r\n\r\n"
        ).encode() + prompt
        assert live.send(raw) == 200
        output = ws.output_dir / ("tenants/alice" if hosted_mode else "") / "afterfuzz_7.png"
        deadline = time.monotonic() + 30
        while not output.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert output.exists(), "the worker stopped running prompts"
    finally:
        live.stop()
    assert _tree(tmp_path, ws.root) == before, "files written outside the workspace"
    assert not any((tmp_path / "outside").iterdir())
