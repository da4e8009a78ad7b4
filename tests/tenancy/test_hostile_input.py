"""Issue 35, items 5-12: input that made a hosted server answer 500 is a clear 4xx naming what was wrong,
nothing is stored, and the server keeps serving: an undecodable Content-Encoding, multipart charset and
transfer-encoding tricks, a decompression bomb, non-UTF-8 header bytes, hostile v2 cursors, extra_data of
the wrong shape (and stored rows that have it), garbage model metadata and a deeply nested websocket frame."""

from __future__ import annotations

import asyncio
import base64
import json
import struct
import zlib
from pathlib import Path

import pytest
import tenant_nodes as tn
from aiohttp import WSMsgType
from test_api_v2_models import form as model_form
from test_api_v2_models import safetensors

from comfy_bridge.server.prompt_queue import QueueItem
from comfy_bridge.tenancy.tenant_context import scoped


def png(size: tuple[int, int] = (4, 4)) -> bytes:
    """A black PNG written by hand: a 20000x20000 one (every row the same) compresses to ~390 KB."""
    width, height = size
    rows = zlib.compressobj(9)
    data = b"".join(rows.compress(b"\x00" * (width + 1)) for _ in range(height)) + rows.flush()

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", data)
        + chunk(b"IEND", b"")
    )


def multipart(*parts: tuple[list[str], bytes]) -> bytes:
    """A multipart body built by hand (aiohttp's client will not send these headers)."""
    out = b""
    for headers, body in parts:
        out += b"--B\r\n" + b"".join(h.encode() + b"\r\n" for h in headers) + b"\r\n" + body + b"\r\n"
    return out + b"--B--\r\n"


IMAGE = (['Content-Disposition: form-data; name="image"; filename="up.png"', "Content-Type: image/png"], png())
FILE = (['Content-Disposition: form-data; name="file"; filename="up.png"', "Content-Type: image/png"], png())


def field(name: str, value: bytes, *headers: str) -> tuple[list[str], bytes]:
    return [f'Content-Disposition: form-data; name="{name}"', *headers], value


FORM = "multipart/form-data; boundary=B"
# (content type, body, image part) -> the same trick for /upload/* (part "image") and /api/v2/assets ("file").
TRICKS = {
    "form-charset": lambda p: ("application/x-www-form-urlencoded; charset=bogus", b"a=b"),
    "text-field-as-file": lambda p: (
        FORM,
        multipart(p, field("type" if p is IMAGE else "file_path", b"input", "Content-Type: application/octet-stream")),
    ),
    "part-charset": lambda p: (
        FORM,
        multipart(
            p, field("subfolder" if p is IMAGE else "file_path", b"x.png", "Content-Type: text/plain; charset=bogus")
        ),
    ),
    "transfer-encoding-field": lambda p: (
        FORM,
        multipart(p, field("subfolder" if p is IMAGE else "file_path", b"x.png", "Content-Transfer-Encoding: foo")),
    ),
    "transfer-encoding-file": lambda p: (
        FORM,
        multipart((p[0] + ["Content-Transfer-Encoding: foo"], p[1]), field("file_path", b"x.png")),
    ),
    "40-byte-_charset_": lambda p: (
        FORM,
        multipart(field("_charset_", b"x" * 40), p, field("subfolder" if p is IMAGE else "file_path", b"x.png")),
    ),
}


async def raw(hosted, head: bytes, body: bytes = b"") -> tuple[int, bytes]:
    """Send bytes as they are (aiohttp's client re-encodes header values) and read the whole answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", hosted.client.server.port)
    writer.write(
        head.replace(b"\n", b"\r\n") + b"Connection: close\r\n" + f"Content-Length: {len(body)}\r\n\r\n".encode() + body
    )
    answer = await reader.read()
    writer.close()
    return int(answer.split(b" ", 2)[1]), answer.split(b"\r\n\r\n", 1)[1]


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


async def test_5_gzip_encoding_on_a_body_that_is_not_gzip_is_400(hosted):
    alice = hosted.add("alice")
    body = json.dumps({"prompt": tn.prompt(1)}).encode()
    r = await hosted.client.post("/prompt", data=body, headers={**alice, "Content-Encoding": "gzip"})
    assert r.status == 400, await r.text()
    error = (await r.json())["error"]
    assert error["type"] == "invalid_body" and "Content-Encoding" in error["message"]
    r = await hosted.client.post("/api/v2/jobs", data=body, headers={**alice, "Content-Encoding": "gzip"})
    assert r.status == 400 and (await r.json())["error"]["code"] == "invalid_request"
    assert hosted.store.queue_rows() == []
    # A body that is gzip is still read.
    r = await hosted.client.post(
        "/prompt", data=zlib.compress(body, wbits=31), headers={**alice, "Content-Encoding": "gzip"}
    )
    assert r.status == 200, await r.text()


@pytest.mark.parametrize(
    "path,trick",
    [
        (path, trick)
        for path in ("/upload/image", "/upload/mask", "/api/v2/assets")
        for trick in sorted(TRICKS)
        # v2 reads every field as text, whatever its part's Content-Type
        if (path, trick) != ("/api/v2/assets", "text-field-as-file")
    ],
)
async def test_6_form_charset_and_part_tricks_are_4xx_and_store_nothing(hosted, workspace, path, trick):
    alice = hosted.add("alice")
    content_type, body = TRICKS[trick](FILE if path == "/api/v2/assets" else IMAGE)
    before = files(workspace.root)
    r = await hosted.client.post(path, data=body, headers={**alice, "Content-Type": content_type})
    assert 400 <= r.status < 500, (r.status, await r.text())
    assert (await r.text()).strip(), "the answer names what was wrong"
    assert {f for f in files(workspace.root) - before if not f.endswith("state.sqlite3-wal")} == set()
    r = await hosted.client.get("/queue", headers=alice)  # still serving
    assert r.status == 200


async def test_7_a_decompression_bomb_is_refused_at_upload_and_at_view(hosted, workspace):
    alice = hosted.add("alice")
    bomb = png((20000, 20000))
    assert len(bomb) < 400_000
    headers = {**alice, "Content-Type": FORM}
    for path in ("/upload/image", "/upload/mask"):
        r = await hosted.client.post(
            path,
            data=multipart((['Content-Disposition: form-data; name="image"; filename="bomb.png"'], bomb)),
            headers=headers,
        )
        assert r.status == 400 and "pixels" in await r.text()
    r = await hosted.client.post(
        "/api/v2/assets",
        data=multipart(
            (['Content-Disposition: form-data; name="file"; filename="bomb.png"'], bomb),
            field("file_path", b"bomb.png"),
        ),
        headers=headers,
    )
    assert r.status == 422 and "pixels" in (await r.json())["error"]["message"]
    assert not [p for p in workspace.root.rglob("bomb*")]
    # One that got there another way (an older version, the operator) is not converted either.
    planted = workspace.input_dir / "tenants" / "alice"
    planted.mkdir(parents=True, exist_ok=True)
    (planted / "bomb.png").write_bytes(bomb)
    for query in ("preview=webp", "preview=jpeg;50", "channel=rgb", "channel=a"):
        r = await hosted.client.get(f"/view?filename=bomb.png&type=input&{query}", headers=alice)
        assert r.status == 400 and "pixels" in await r.text(), (query, r.status)
    # Within the limit, the same conversions work.
    (planted / "fine.png").write_bytes(png((64, 64)))
    for query in ("preview=webp", "channel=rgb", "channel=a"):
        assert (await hosted.client.get(f"/view?filename=fine.png&type=input&{query}", headers=alice)).status == 200


async def test_8_v2_jobs_idempotency_key_bytes_and_hostile_cursors_are_400(hosted):
    alice = hosted.add("alice")
    key = hosted.keys["alice"].encode()
    body = json.dumps({"workflow": tn.prompt(1)}).encode()
    status, answer = await raw(
        hosted,
        b"POST /api/v2/jobs HTTP/1.1\nHost: 127.0.0.1\nAuthorization: Bearer "
        + key
        + b"\nIdempotency-Key: a\xff\xfeb\n",
        body,
    )
    assert status == 400 and b"Idempotency-Key" in answer, answer
    assert hosted.store.queue_rows() == []
    for cursor in (json.dumps([int("9" * 400), "x"]), "[" * 1500 + "]" * 1500, '[NaN, "x"]', '[true, "x"]'):
        text = base64.urlsafe_b64encode(cursor.encode()).decode()
        r = await hosted.client.get("/api/v2/jobs", params={"cursor": text}, headers=alice)
        assert r.status == 400 and (await r.json())["error"]["code"] == "invalid_cursor", cursor[:20]


@pytest.mark.parametrize("pnginfo", [1, "workflow", [1], True, "", 0])
async def test_9_extra_pnginfo_that_is_not_an_object_is_400(hosted, pnginfo):
    alice = hosted.add("alice")
    r = await hosted.client.post(
        "/prompt", json={"prompt": tn.prompt(1), "extra_data": {"extra_pnginfo": pnginfo}}, headers=alice
    )
    assert r.status == 400 and "extra_pnginfo" in (await r.json())["error"]["details"]
    assert hosted.store.queue_rows() == []


async def test_9_credentials_in_extra_data_must_be_strings(hosted):
    alice = hosted.add("alice")
    r = await hosted.client.post(
        "/prompt", json={"prompt": tn.prompt(1), "extra_data": {"api_key_comfy_org": [1]}}, headers=alice
    )
    assert r.status == 400 and "api_key_comfy_org" in (await r.json())["error"]["details"]
    r = await hosted.client.post(
        "/prompt",
        json={
            "prompt": tn.prompt(2),
            "extra_data": {"extra_pnginfo": {"workflow": {"id": "w1"}}, "api_key_comfy_org": None},
        },
        headers=alice,
    )
    assert r.status == 200  # the shapes ComfyUI's web UI sends still pass


async def test_9_a_stored_row_of_the_wrong_shape_is_listed_without_that_part(hosted):
    """A row stored before the door checked extra_data (or damaged) still lists, queued and finished."""
    alice = hosted.add("alice")
    queue = hosted.server.prompt_queue
    with scoped("alice"):  # as POST /prompt puts an item, without its check of extra_data
        for i, extra in enumerate(
            (
                {"extra_pnginfo": 1},
                {"extra_pnginfo": ["x"]},
                {"create_time": "soon"},
                {"extra_pnginfo": {"workflow": 5}},
            )
        ):
            queue.put(QueueItem(100 + i, f"bad{i}", tn.prompt(10 + i), extra, ["2"], {}))
    for path in ("/jobs", "/api/jobs", "/jobs?sort_by=execution_duration"):
        r = await hosted.client.get(path, headers=alice)
        assert r.status == 200, (path, await r.text())
    for i in range(4):
        await hosted.wait_history("alice", f"bad{i}")
    jobs = (await (await hosted.client.get("/jobs", headers=alice)).json())["jobs"]
    assert {j["id"] for j in jobs} >= {f"bad{i}" for i in range(4)}
    assert all("workflow_id" not in j for j in jobs)
    r = await hosted.client.get("/jobs/bad0", headers=alice)
    assert r.status == 200 and (await r.json())["status"] == "completed"


async def test_10_session_cookie_or_key_of_non_utf8_bytes_is_401(hosted):
    hosted.add("alice")
    for header in (
        b"Cookie: comfy_cluster_session=\xff",
        b"Cookie: comfy_cluster_session=a\xffb",
        b"Authorization: Bearer \xff\xfe",
        b"X-API-Key: k\xff",
    ):
        status, answer = await raw(hosted, b"GET /queue HTTP/1.1\nHost: 127.0.0.1\n" + header + b"\n")
        assert status == 401 and b"authentication required" in answer, (header, answer)
    status, _ = await raw(hosted, b"POST /logout HTTP/1.1\nHost: 127.0.0.1\nCookie: comfy_cluster_session=\xff\n")
    assert status == 200
    status, _ = await raw(
        hosted, b"POST /login HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\n", b'{"key": "\\ud800"}'
    )
    assert status == 401


async def test_11_model_metadata_routes_on_garbage_files_are_404(hosted, workspace):
    alice = hosted.add("alice")
    folder = workspace.root / "models" / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    header = b"[1, 2]"
    (folder / "list.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    (folder / "cover.safetensors").write_bytes(safetensors(meta={"ssmd_cover_images": json.dumps(["aGVsbG8="])}))
    (folder / "cover2.safetensors").write_bytes(safetensors(meta={"ssmd_cover_images": '{"a": 1}'}))
    (folder / "sibling.safetensors").write_bytes(safetensors())
    (folder / "sibling.png").write_bytes(b"not a png")
    (folder / "bomb.safetensors").write_bytes(safetensors())
    (folder / "bomb.png").write_bytes(png((20000, 20000)))
    r = await hosted.client.get("/view_metadata/checkpoints?filename=list.safetensors", headers=alice)
    assert r.status == 404
    for name in ("list", "cover", "cover2", "sibling", "bomb"):
        r = await hosted.client.get(f"/experiment/models/preview/checkpoints/0/{name}.safetensors", headers=alice)
        assert r.status == 404, (name, r.status, await r.text())
    # A tenant plants a garbage cover through the v2 assets route: its own preview is a 404 too.
    lora = safetensors(meta={"ssmd_cover_images": json.dumps([base64.b64encode(b"garbage").decode()])})
    r = await hosted.client.post(
        "/api/v2/assets", data=model_form(lora, "models/loras/planted.safetensors"), headers=alice
    )
    assert r.status == 201, await r.text()
    listing = await (await hosted.client.get("/experiment/models/loras", headers=alice)).json()
    entry = next(e for e in listing if e["name"] == "planted.safetensors")
    r = await hosted.client.get(
        f"/experiment/models/preview/loras/{entry['pathIndex']}/planted.safetensors", headers=alice
    )
    assert r.status == 404 and "not a readable image" in await r.text()
    # A good cover still previews.
    good = safetensors(meta={"ssmd_cover_images": json.dumps([base64.b64encode(png()).decode()])})
    (folder / "good.safetensors").write_bytes(good)
    r = await hosted.client.get("/experiment/models/preview/checkpoints/0/good.safetensors", headers=alice)
    assert r.status == 200 and r.content_type == "image/webp"


async def test_12_deeply_nested_websocket_frame_is_answered_and_the_socket_kept(hosted):
    alice = hosted.add("alice")
    ws = await hosted.client.ws_connect("/ws?clientId=deep", headers=alice)
    assert (await ws.receive_json(timeout=30))["type"] == "status"
    await ws.send_str('{"a":' * 5000 + "1" + "}" * 5000)
    msg = await ws.receive(timeout=30)
    assert msg.type == WSMsgType.TEXT, msg
    error = json.loads(msg.data)
    assert error["type"] == "error" and "nested" in error["data"]["message"]
    # Still connected: it gets its own prompt's messages.
    r = await hosted.client.post("/prompt", json={"prompt": tn.prompt(3), "client_id": "deep"}, headers=alice)
    assert r.status == 200
    while (await ws.receive_json(timeout=30))["type"] != "execution_success":
        pass
    await ws.close()


async def test_fuzz_a_settings_file_too_deep_to_parse_does_not_fail_every_later_settings_request(hosted):
    """Found by the seeded fuzz: POST /userdata/comfy.settings.json stores any bytes; a file nested past
    the parser's depth made every GET and POST /settings of that user a 500 from then on."""
    alice = hosted.add("alice")
    r = await hosted.client.post("/userdata/comfy.settings.json", data="[" * 3000 + "]" * 3000, headers=alice)
    assert r.status == 200
    r = await hosted.client.get("/settings", headers=alice)
    assert r.status == 200 and await r.json() == {}
    assert (await hosted.client.post("/settings/Comfy.A", json=1, headers=alice)).status == 200
    assert await (await hosted.client.get("/settings/Comfy.A", headers=alice)).json() == 1


async def test_fuzz_login_form_in_an_unknown_charset_is_400(hosted):
    """Found by the seeded fuzz: the login form's body in a charset Python does not know was a 500."""
    hosted.add("alice")
    r = await hosted.client.post(
        "/login", data=b"key=x", headers={"Content-Type": "application/x-www-form-urlencoded; charset=bogus"}
    )
    assert r.status == 400 and "could not be read" in await r.text()


async def test_9_a_row_stored_by_an_older_version_lists_after_a_restart(workspace, tmp_path):
    """Rows with extra_pnginfo of another shape already in the state database when the server starts."""
    from aiohttp.test_utils import TestClient, TestServer

    from comfy_bridge.server import ServerConfig, create_app
    from comfy_bridge.tenancy.store import Store

    store = Store(tmp_path / "state.sqlite3")
    for i, pnginfo in enumerate((1, "text", [1])):
        store.queue_add(
            "", f"old{i}", float(i), [float(i), f"old{i}", tn.prompt(20 + i), {"extra_pnginfo": pnginfo}, ["2"]]
        )
    store.close()
    (tmp_path / "web").mkdir()
    config = ServerConfig(workspace=workspace, state_db=tmp_path / "state.sqlite3", front_end_root=tmp_path / "web")
    async with TestClient(TestServer(create_app(config, registry=tn.registry()))) as client:
        assert (await client.get("/jobs")).status == 200
        for i in range(3):
            for _ in range(400):
                if f"old{i}" in await (await client.get(f"/history/old{i}")).json():
                    break
                await asyncio.sleep(0.05)
        r = await client.get("/api/jobs?status=completed")
        assert r.status == 200
        assert {j["id"] for j in (await r.json())["jobs"]} == {"old0", "old1", "old2"}
