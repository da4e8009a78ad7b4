"""Seeded fuzz of malformed requests against every route the app registers (issue 35's bad-input search,
kept as a test): bodies that are broken JSON, JSON of the wrong types, huge, negative and odd numbers,
lone surrogates and deep nesting; Content-Encodings the body does not follow; multipart charset, part and
transfer-encoding tricks; header values of bytes that are not UTF-8 (keys, cookies, Idempotency-Key);
hostile v2 cursors; path and query tricks aimed at planted hostile files (a decompression bomb, garbage
images, safetensors whose header is a list, garbage cover images, a stored job whose extra_data has the
wrong shape); and websocket frames. Raw HTTP on loopback to a hosted and a single-user server.

No answer is a 5xx or a dropped connection, aiohttp logs no unhandled error, and the server still runs a
prompt afterwards. Bounded: FUZZ_REQUESTS (default 900) requests per mode, seeded by FUZZ_SEED (default 35),
8 at a time; about 15 s per mode on a shared 2-core machine."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import logging
import os
import random
import re
import struct
import time
import zlib
from pathlib import Path
from urllib.parse import quote

import pytest
import tenant_nodes as tn
from aiohttp import WSMsgType
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.test_utils import TestClient, TestServer
from aiohttp.web_protocol import RequestPayloadError
from app_routes import app_routes
from test_hostile_input import png

from comfy_bridge.server import ServerConfig, create_app
from comfy_bridge.server.app import SERVER_KEY
from comfy_bridge.server.prompt_queue import QueueItem
from comfy_bridge.tenancy.keys import split_key
from comfy_bridge.tenancy.tenant_context import scoped
from nodes.workspace import Workspace

REQUESTS = int(os.environ.get("FUZZ_REQUESTS", "900"))
SEED = int(os.environ.get("FUZZ_SEED", "35"))
PARALLEL = 8
BOUNDARY = "fuzzB"

# Values for path parameters and query strings: planted files, ids, traversal, odd numbers and bytes.
NAMES = [
    "bomb.png",
    "garbage.png",
    "fine.png",
    "list.safetensors",
    "cover.safetensors",
    "sibling.safetensors",
    "fine.png [input]",
    "bomb.png [output]",
    "workflows/a.json",
    "comfy.settings.json",
    "bad0",
    "x",
]
ODD = [
    "",
    "..",
    "../..",
    "..%2F..%2Fetc%2Fpasswd",
    "%2e%2e",
    "%00",
    "%ff",
    "%c3%28",
    "%ed%a0%80",
    "a" * 400,
    "-1",
    "0",
    "1" * 400,
    "-" + "9" * 30,
    "1e999",
    "NaN",
    "null",
    "[]",
    "{}",
    "\u202e",
    "😀",
    "%",
    "x;y",
    "a b",
]
NUMBERS = ["-1", "0", "1", "2", "64", "100", "101", "9" * 20, "-" + "9" * 20, "1" * 400, "1e999", "NaN", "0x10", " 3"]
QUERY_KEYS = {
    "filename": NAMES,
    "type": ["input", "output", "temp", "x", ""],
    "subfolder": ["", "..", "tenants/bob", "a"],
    "preview": ["webp", "webp;90", "jpeg;50", "jpeg;-5", "png", "webp;" + "9" * 30],
    "channel": ["rgb", "a", "x", ""],
    "max_items": NUMBERS,
    "offset": NUMBERS,
    "limit": NUMBERS,
    "status": ["queued", "pending,completed", "x", ""],
    "sort_by": ["created_at", "execution_duration", "x"],
    "sort_order": ["asc", "desc", "x"],
    "dir": ["workflows", "..", ""],
    "recurse": ["true", "x"],
    "split": ["true"],
    "full_info": ["true"],
    "overwrite": ["true", "false", "x"],
    "clientId": ["c1", "\u202e", "a" * 300],
    "workflow_id": ["w", ""],
    "next": ["/", "//evil.example", "javascript:x"],
    "path": ["a", ".."],
    "metadata[a]": ["b", "x" * 300],
}


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


CURSORS = [
    _b64(json.dumps([int("9" * 400), "x"])),
    _b64("[" * 1500 + "]" * 1500),
    _b64('[NaN, "x"]'),
    _b64('[1e999, "x"]'),
    _b64("[1, 2]"),
    _b64("{}"),
    "!!!",
    "a",
    _b64('["1", "x"]'),
    _b64('[1, "x", 3]'),
]
QUERY_KEYS["cursor"] = CURSORS


def json_value(rng: random.Random, depth: int = 0):
    """A random JSON value, odd ones favoured."""
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice([0, -1, 1, 2**31, 2**53, 2**63, -(2**63) - 1, 2**64, 10**30])
    if kind == 2:
        return rng.choice([0.5, -0.0, 1e308, -1e308, 5e-324])
    if kind in (3, 4, 5):
        return rng.choice(NAMES + ODD + ["\ud800", "\x00", "a\nb", "<script>"])
    if kind == 6:
        return [json_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {
        rng.choice(["workflow", "id", "a", "", "prompt", "0"]): json_value(rng, depth + 1)
        for _ in range(rng.randrange(4))
    }


def prompt_body(rng: random.Random) -> dict:
    """A POST /prompt or /api/v2/jobs body: a real prompt with fields of random shapes."""
    body: dict = {"prompt": tn.prompt(rng.randrange(1000), prefix=rng.choice(["fz", "a/b", "..", ""]))}
    body["workflow"] = body["prompt"] if rng.random() < 0.5 else json_value(rng)
    for key in rng.sample(
        [
            "number",
            "front",
            "client_id",
            "prompt_id",
            "partial_execution_targets",
            "extra_data",
            "metadata",
            "delete",
            "clear",
            "job_ids",
            "hash",
            "tags",
            "expires_in",
            "key",
            "next",
            "file_path",
        ],
        rng.randrange(4),
    ):
        body[key] = json_value(rng)
    if rng.random() < 0.4:
        body["extra_data"] = {
            rng.choice(
                ["extra_pnginfo", "client_id", "api_key_comfy_org", "auth_token_comfy_org", "create_time", "x"]
            ): json_value(rng)
        }
    if rng.random() < 0.2:
        body["prompt"] = json_value(rng)
    return body


def json_body(rng: random.Random) -> bytes:
    choice = rng.randrange(8)
    if choice == 0:
        return b'{"prompt": ' * rng.choice([100, 1500, 5000])  # deep nesting, unterminated
    if choice == 1:
        return ("[" * 3000 + "]" * 3000).encode()
    if choice == 2:
        return b'{"number": ' + b"7" * rng.choice([400, 5000]) + b', "prompt": {}}'
    if choice == 3:
        return rng.choice(
            [
                b'{"number": NaN}',
                b'{"number": Infinity}',
                b'{"a": 1e999}',
                b'{"a": "\\ud800"}',
                b'{"key": "\\udcff"}',
                b"\xff\xfe{",
                b"{'a': 1}",
                b"",
                b"null",
                b"[]",
                b"3",
            ]
        )
    if choice == 4:
        return json.dumps(json_value(rng)).encode()
    return json.dumps(prompt_body(rng)).encode()


def _part(name: str, data: bytes, filename: str | None = None, headers: tuple[str, ...] = ()) -> bytes:
    disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename is not None else "")
    head = "".join(f"{h}\r\n" for h in (f"Content-Disposition: {disposition}", *headers))
    return f"--{BOUNDARY}\r\n".encode() + head.encode("utf-8", "surrogateescape") + b"\r\n" + data + b"\r\n"


def multipart_body(rng: random.Random, files: dict[str, bytes]) -> bytes:
    """A multipart body with the part tricks of issue 35 item 6 and the planted images."""
    parts = []
    file_name = rng.choice(["image", "file"])
    parts.append(
        _part(
            file_name,
            files[rng.choice(list(files))],
            rng.choice(["up.png", "b.png", "", "../x.png", "a\\b.png", "x.safetensors"]),
            rng.choice(
                [
                    (),
                    ("Content-Type: image/png",),
                    ("Content-Transfer-Encoding: foo",),
                    ("Content-Transfer-Encoding: base64",),
                    ("Content-Type: text/plain; charset=bogus",),
                ]
            ),
        )
    )
    for _ in range(rng.randrange(4)):
        name = rng.choice(
            [
                "type",
                "subfolder",
                "overwrite",
                "original_ref",
                "file_path",
                "tags",
                "expires_in",
                "content_type",
                "expected_hash",
                "_charset_",
                "x",
            ]
        )
        value = rng.choice(
            [
                b"input",
                b"output",
                b"..",
                b"true",
                b"x" * 40,
                b"utf-8",
                b"bogus",
                b"\xff\xfe",
                b'{"filename": "fine.png", "type": "input"}',
                b'{"filename": 5}',
                b"[" * 2000,
                b"models/loras/fz.safetensors",
                b"models/checkpoints/../x.safetensors",
                b"fz.png",
                b"99999999999999999999",
                b"blake3:" + b"0" * 64,
            ]
        )
        headers = rng.choice(
            [
                (),
                ("Content-Type: application/octet-stream",),
                ("Content-Type: text/plain; charset=bogus",),
                ("Content-Transfer-Encoding: foo",),
                ("Content-Transfer-Encoding: quoted-printable",),
                ("Content-Type: text/plain; charset=utf-16",),
            ]
        )
        parts.insert(rng.randrange(len(parts) + 1), _part(name, value, headers=headers))
    body = b"".join(parts) + f"--{BOUNDARY}--\r\n".encode()
    return body if rng.random() < 0.9 else body[: rng.randrange(len(body))]  # sometimes cut short


def safetensors(header: bytes) -> bytes:
    return struct.pack("<Q", len(header)) + header


def plant(ws: Workspace, tenant: str) -> dict[str, bytes]:
    """Hostile files where the routes look (the tenant's own folders and the shared ones)."""
    bomb, fine = png((20000, 20000)), png((16, 16))
    images = {"bomb.png": bomb, "garbage.png": b"\x89PNG\r\n\x1a\ngarbage", "fine.png": fine}
    sub = Path("tenants", tenant) if tenant else Path()
    for base in (ws.input_dir, ws.output_dir, ws.input_dir / sub, ws.output_dir / sub):
        base.mkdir(parents=True, exist_ok=True)
        for name, data in images.items():
            (base / name).write_bytes(data)
    covers = {"ssmd_cover_images": base64.b64encode(b"garbage").decode()}
    models = {
        "list.safetensors": safetensors(b"[1, 2]"),
        "number.safetensors": safetensors(b"7"),
        "cover.safetensors": safetensors(json.dumps({"__metadata__": covers}).encode()),
        "sibling.safetensors": safetensors(b"{}"),
        "sibling.png": b"garbage",
        "bombside.safetensors": safetensors(b"{}"),
        "bombside.png": bomb,
    }
    for folder in ("checkpoints", "loras"):
        for root in (ws.root / "models" / folder, ws.root / "models" / "tenants" / (tenant or "x") / folder):
            root.mkdir(parents=True, exist_ok=True)
            for name, data in models.items():
                (root / name).write_bytes(data)
    return {**images, "model": models["cover.safetensors"], "text": b"hello"}


def fill(template: str, rng: random.Random) -> str:
    def value(match: re.Match) -> str:
        name = match.group(1)
        if name == "path_index":
            return rng.choice(["0", "1", "-1", "99", "x", "9" * 30])
        if name in ("folder", "folder_name", "directory_type"):
            return rng.choice(["checkpoints", "loras", "output", "input", "temp", "x", "..", "configs"])
        picked = rng.choice(NAMES + ODD + ["bad0", "00000000-0000-0000-0000-000000000000", "blake3:" + "0" * 64])
        return picked if "%" in picked else quote(picked, safe="")

    return re.sub(r"\{([^}:]*)(?::[^}]*)?\}", value, template)


def build_request(
    rng: random.Random, route: tuple[str, str], secrets: dict[str, str], files: dict[str, bytes]
) -> bytes:
    method, template = route
    path = fill(template, rng)
    if rng.random() < 0.1:
        method = rng.choice(["PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "POST", "GET"])
    query = {k: rng.choice(v) for k, v in rng.sample(sorted(QUERY_KEYS.items()), rng.randrange(4))}
    if query:
        path += "?" + "&".join(
            f"{quote(k, safe='[]')}={v if '%' in v else quote(v, safe='')}" for k, v in query.items()
        )
    headers: dict[str, bytes] = {"Host": b"127.0.0.1", "Connection": b"close"}
    auth = rng.choice(["key", "key", "key", "admin", "cookie", "none", "odd"])
    if auth in ("key", "admin"):
        headers["Authorization"] = b"Bearer " + secrets[auth].encode()
    elif auth == "cookie":
        headers["Cookie"] = b"comfy_cluster_session=" + secrets["session"].encode()
    elif auth == "odd":
        name = rng.choice(["Authorization", "X-API-Key", "Cookie"])
        headers[name] = rng.choice(
            [
                b"Bearer \xff\xfe",
                b"\xff",
                b"comfy_cluster_session=\xff",
                b"comfy_cluster_session=a\xffb; x=\xfe",
                b"Bearer " + b"a" * 5000,
                b"comfy_cluster_session=" + secrets["session"].encode() + b"\xff",
                b"Basic ==",
            ]
        )
    family = rng.randrange(6)
    body = b""
    if family == 0:  # JSON, maybe declared as something else
        body = json_body(rng)
        headers["Content-Type"] = rng.choice([b"application/json", b"text/plain", b"application/json; charset=bogus"])
    elif family == 1:  # a Content-Encoding the body does or does not follow
        raw = json_body(rng)
        encoding = rng.choice([b"gzip", b"deflate", b"br", b"zstd", b"foo", b"gzip, gzip", b"identity"])
        good = rng.random() < 0.3
        body = (gzip.compress(raw) if encoding == b"gzip" else zlib.compress(raw)) if good else raw
        headers["Content-Encoding"] = encoding
        headers["Content-Type"] = b"application/json"
    elif family == 2:  # multipart tricks
        body = multipart_body(rng, files)
        headers["Content-Type"] = rng.choice(
            [
                f"multipart/form-data; boundary={BOUNDARY}".encode(),
                f"multipart/form-data; boundary={BOUNDARY}; charset=bogus".encode(),
                b"multipart/form-data",
                b"multipart/mixed; boundary=" + BOUNDARY.encode(),
            ]
        )
    elif family == 3:  # a urlencoded form
        body = rng.choice([b"key=x&next=/", b"a=%ff%fe", b"type=input&subfolder=..", b"=" * 100, b"a=b&" * 500])
        headers["Content-Type"] = rng.choice(
            [
                b"application/x-www-form-urlencoded",
                b"application/x-www-form-urlencoded; charset=bogus",
                b"application/x-www-form-urlencoded; charset=utf-16",
            ]
        )
    elif family == 4:  # odd header bytes on a plain request
        headers[
            rng.choice(
                [
                    "Idempotency-Key",
                    "Origin",
                    "Range",
                    "If-Modified-Since",
                    "Accept-Encoding",
                    "Comfy-User",
                    "Referer",
                    "Sec-WebSocket-Key",
                ]
            )
        ] = rng.choice(
            [
                b"\xff\xfe",
                b"a" * 300,
                b"bytes=5-1",
                b"bytes=-0",
                b"bytes=99999999999999999999-",
                b"null",
                b"http://evil.example",
                b"\xc3\x28",
                b"gzip;q=NaN",
                b"",
                b"x" * 40,
            ]
        )
    if method in ("POST", "PUT", "PATCH") or body:
        headers["Content-Length"] = str(len(body)).encode()
    if path.split("?")[0] in ("/ws", "/api/ws") and rng.random() < 0.7:  # a real upgrade, odd clientId and all
        headers.update(
            {
                "Upgrade": b"websocket",
                "Connection": b"Upgrade",
                "Sec-WebSocket-Version": b"13",
                "Sec-WebSocket-Key": b"dGhlIHNhbXBsZSBub25jZQ==",
            }
        )
    if rng.random() < 0.1:
        headers["Idempotency-Key"] = rng.choice([b"k\xff", b"", b"a" * 256, b"fuzz-" + str(rng.random()).encode()])
    head = f"{method} {path} HTTP/1.1\r\n".encode("utf-8", "surrogatepass")
    return head + b"".join(k.encode() + b": " + v + b"\r\n" for k, v in headers.items()) + b"\r\n" + body


async def send(port: int, raw: bytes) -> int:
    """The status of the answer to `raw`; -1 when the connection ends without one."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 30)
        return int(line.split(b" ", 2)[1]) if line.startswith(b"HTTP/") else -1
    except (ConnectionError, OSError):
        return -1
    finally:
        writer.close()


async def websocket_frames(client: TestClient, auth: dict, rng: random.Random) -> None:
    """Malformed text and binary frames on one socket: every text frame that is no JSON is answered with
    an error message, and the socket stays open throughout."""
    ws = await client.ws_connect("/ws?clientId=fuzz", headers=auth)
    await ws.receive_json(timeout=30)
    frames = [
        '{"a":' * 5000 + "1" + "}" * 5000,
        "[" * 100000,
        "not json",
        '{"type": "feature_flags", "data": 5}',
        '{"type": "feature_flags", "data": {"a": ' + "[" * 3000 + "]" * 3000 + "}}",
        "\ud800",
        '"\\ud800"',
        json.dumps({"type": "x", "data": json_value(rng)}),
        "1" * 5000,
        "NaN",
    ]
    for text in rng.sample(frames, len(frames)):
        await ws.send_str(text.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))
    await ws.send_bytes(b"\x00\x00\x00\x01" + os.urandom(64))
    await ws.send_str('{"type": "ping"}')
    answered = 0
    while answered < 5:  # the five that are no JSON: deep object, unclosed list, text, 1e5000-digit-ish, NaN
        msg = await ws.receive(timeout=30)
        assert msg.type == WSMsgType.TEXT, msg
        answered += json.loads(msg.data)["type"] == "error"
    assert not ws.closed
    await ws.close()


@pytest.fixture
def aiohttp_errors(caplog):
    caplog.set_level(logging.ERROR, logger="aiohttp.server")
    return caplog


@pytest.mark.parametrize("hosted_mode", [True, False], ids=["hosted", "single-user"])
async def test_seeded_malformed_requests_never_answer_5xx(tmp_path, hosted_mode, aiohttp_errors):
    ws = Workspace(tmp_path / "ws").create()
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "index.html").write_text("<html>ui</html>")
    config = ServerConfig(
        workspace=ws,
        state_db=tmp_path / "state.sqlite3" if hosted_mode else None,
        front_end_root=tmp_path / "web",
        max_upload_size=2,
    )
    app = create_app(config, registry=tn.registry())
    server = app[SERVER_KEY]
    rng = random.Random(SEED * 2 + hosted_mode)
    async with TestClient(TestServer(app)) as client:
        secrets = {"key": "none", "admin": "none", "session": "none"}
        if hosted_mode:
            server.store.add_tenant("alice")
            server.store.add_tenant("admin", admin=True)
            secrets.update(key=server.store.create_key("alice"), admin=server.store.create_key("admin"))
            secrets["session"] = server.store.create_session("alice", split_key(secrets["key"])[0], 3600)
            server.gate._active = (0.0, False)
        auth = {"Authorization": f"Bearer {secrets['key']}"} if hosted_mode else {}
        files = plant(ws, "alice" if hosted_mode else "")
        with scoped("alice" if hosted_mode else None):  # a stored job whose extra_data has the wrong shape
            server.prompt_queue.put(QueueItem(0, "bad0", tn.prompt(1), {"extra_pnginfo": 1}, ["2"], {}))
        routes = sorted(app_routes(app))
        assert len(routes) >= 170 and ("GET", "/ws") in routes and ("POST", "/upload/image") in routes
        assert (("POST", "/api/v2/assets") in routes) == hosted_mode  # the v2 API comes with tenancy
        # Every route at least twice, then routes drawn at random; all seeded.
        plan = routes * 2 + [rng.choice(routes) for _ in range(max(REQUESTS - 2 * len(routes), 0))]
        requests = [build_request(rng, route, secrets, files) for route in plan]
        assert len(requests) >= REQUESTS
        failures: list[tuple[int, bytes]] = []
        gate = asyncio.Semaphore(PARALLEL)
        started = time.monotonic()

        async def one(raw: bytes) -> None:
            async with gate:
                status = await send(client.server.port, raw)
            if status >= 500 or status == -1:
                failures.append((status, raw[:400]))

        await asyncio.gather(*(one(raw) for raw in requests))
        elapsed = time.monotonic() - started
        routes_failed = sorted({r.split(b"?")[0].split(b" HTTP")[0].decode("utf-8", "replace") for _, r in failures})
        assert not failures, f"{len(failures)} of {len(requests)} failed, on {routes_failed}:\n" + "\n".join(
            f"{s}: {r!r}" for s, r in failures[:8]
        )
        await websocket_frames(client, auth, rng)
        # aiohttp logs at ERROR its own parser's 400s (HttpProcessingError) and, after a route answered
        # without reading a body it cannot decode, the failed drain of that body (RequestPayloadError; the
        # answer was sent, its status is checked above). Anything else is a handler's exception: a 500.
        unhandled = [
            f"{r.getMessage()}: {r.exc_info[1]!r}"
            for r in aiohttp_errors.records
            if r.name == "aiohttp.server"
            and not (r.exc_info and isinstance(r.exc_info[1], (HttpProcessingError, RequestPayloadError)))
        ]
        assert not unhandled, unhandled[:3]
        assert elapsed < 90, f"{len(requests)} requests took {elapsed:.0f} s"
        # Still serving and running prompts.
        r = await client.post("/prompt", json={"prompt": tn.prompt(7, prefix="afterfuzz")}, headers=auth)
        assert r.status == 200, await r.text()
        output = ws.output_dir / ("tenants/alice" if hosted_mode else "") / "afterfuzz_7.png"
        deadline = time.monotonic() + 60
        while not output.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert output.exists(), "the worker stopped running prompts"
