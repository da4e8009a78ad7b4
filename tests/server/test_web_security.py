"""Browser-facing defences: Host allow-list against DNS rebinding, Origin checks against CSRF
(foreign origins, `Origin: null`, Sec-Fetch-Site) on state-changing routes and the websocket,
CORS only when configured, and workspace files never served as active content."""

from __future__ import annotations

import io

import aiohttp
import pytest
from PIL import Image

from .conftest import simple_prompt

SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(document.cookie)</script></svg>'
HTML = b"<html><body><script>alert(1)</script></body></html>"


def upload_form(data: bytes, name: str) -> aiohttp.FormData:
    form = aiohttp.FormData()
    form.add_field("image", data, filename=name)
    return form


async def queued(client) -> int:
    return len((await (await client.get("/queue")).json())["queue_pending"])


async def test_rebinding_host_is_refused_but_loopback_and_ip_names_pass(client):
    port = client.port
    for host in (f"attacker.example:{port}", "attacker.example", f"evil.localhost.attacker.example:{port}"):
        r = await client.get("/prompt", headers={"Host": host})
        assert r.status == 403, host
        assert "allowed-hosts" in await r.text()
        r = await client.post("/prompt", json={"prompt": simple_prompt()}, headers={"Host": host})
        assert r.status == 403, host
    assert await queued(client) == 0
    for host in (
        f"127.0.0.1:{port}",
        f"localhost:{port}",
        f"[::1]:{port}",
        f"ui.localhost:{port}",
        f"192.168.7.9:{port}",
    ):
        assert (await client.get("/prompt", headers={"Host": host})).status == 200, host
    with pytest.raises(aiohttp.WSServerHandshakeError) as err:
        await client.ws_connect("/ws", headers={"Host": f"attacker.example:{port}"})
    assert err.value.status == 403


async def test_allowed_hosts_admit_names_and_subdomains(make_client):
    client = await make_client(allowed_hosts=("comfy.example.com", ".tenant.example.org"))
    for host, status in (
        ("comfy.example.com", 200),
        ("COMFY.EXAMPLE.COM.:443", 200),
        ("a.tenant.example.org", 200),
        ("tenant.example.org", 200),
        ("other.example.com", 403),
        ("xtenant.example.org", 403),
    ):
        assert (await client.get("/prompt", headers={"Host": host})).status == status, host
    open_client = await make_client(allowed_hosts=("*",))
    assert (await open_client.get("/prompt", headers={"Host": "anything.example"})).status == 200


async def test_listen_names_are_allowed_hosts(make_client):
    client = await make_client(listen="127.0.0.1,comfy-box.lan")
    assert (await client.get("/prompt", headers={"Host": "comfy-box.lan:8188"})).status == 200
    assert (await client.get("/prompt", headers={"Host": "other-box.lan:8188"})).status == 403


async def test_null_and_foreign_origins_cannot_change_state(make_client):
    client = await make_client(allowed_hosts=("comfy.example.com",))
    host = "comfy.example.com"
    body = {"prompt": simple_prompt()}
    for origin, h in (
        ("null", host),
        ("https://attacker.example", host),
        ("not a url", host),
        ("http://comfy.example.com.attacker.example", host),
        ("https://comfy.example.com", host + ":8443"),
        ("https://comfy.example.com:8443", host + ":443"),
    ):
        headers = {"Host": h, "Origin": origin}
        r = await client.post("/prompt", json=body, headers=headers)
        assert r.status == 403, origin
        assert (await client.post("/upload/image", data=upload_form(b"x", "a.png"), headers=headers)).status == 403
        assert (await client.post("/userdata/x.json", data=b"{}", headers=headers)).status == 403
        assert (await client.delete("/userdata/x.json", headers=headers)).status == 403
        assert (await client.post("/interrupt", json={}, headers=headers)).status == 403
        with pytest.raises(aiohttp.WSServerHandshakeError) as err:
            await client.ws_connect("/ws", headers=headers)
        assert err.value.status == 403
        # A cross-origin read on a non-loopback name is harmless without CORS: the browser hides it.
        assert (await client.get("/prompt", headers=headers)).status == 200
    assert await queued(client) == 0
    # A cross-site form post without an Origin header is caught by Sec-Fetch-Site.
    r = await client.post("/prompt", json=body, headers={"Host": host, "Sec-Fetch-Site": "cross-site"})
    assert r.status == 403
    assert await queued(client) == 0
    # A Host without a port (a proxy dropped it) is compared by name.
    for origin, h in (
        ("https://comfy.example.com", host),
        ("http://comfy.example.com:8188", host + ":8188"),
        ("https://comfy.example.com:8443", host),
        ("https://comfy.example.com", host + ":443"),
    ):
        r = await client.post(
            "/prompt", json=body, headers={"Host": h, "Origin": origin, "Sec-Fetch-Site": "same-origin"}
        )
        assert r.status == 200, origin
    ws = await client.ws_connect("/ws", headers={"Host": host, "Origin": "https://comfy.example.com"})
    assert (await ws.receive_json(timeout=5))["type"] == "status"
    await ws.close()


async def test_loopback_keeps_comfyui_origin_guard_on_every_method(client):
    host = f"127.0.0.1:{client.port}"
    assert (await client.get("/prompt", headers={"Host": host, "Origin": "null"})).status == 403
    assert (
        await client.get("/prompt", headers={"Host": host, "Origin": f"http://localhost:{client.port}"})
    ).status == 403
    ok = await client.post(
        "/prompt", json={"prompt": simple_prompt()}, headers={"Host": host, "Origin": f"http://127.0.0.1:{client.port}"}
    )
    assert ok.status == 200
    assert "Access-Control-Allow-Origin" not in ok.headers  # no CORS unless configured


async def test_cors_only_for_configured_origins(make_client):
    client = await make_client(enable_cors_header="https://app.example,https://ops.example")
    host = f"127.0.0.1:{client.port}"
    r = await client.post(
        "/prompt", json={"prompt": simple_prompt()}, headers={"Host": host, "Origin": "https://app.example"}
    )
    assert r.status == 200 and r.headers["Access-Control-Allow-Origin"] == "https://app.example"
    assert r.headers["Vary"] == "Origin"
    r = await client.post(
        "/prompt", json={"prompt": simple_prompt()}, headers={"Host": host, "Origin": "https://evil.example"}
    )
    assert r.status == 403 and "Access-Control-Allow-Origin" not in r.headers
    pre = await client.options(
        "/prompt", headers={"Origin": "https://ops.example", "Access-Control-Request-Private-Network": "true"}
    )
    assert pre.headers["Access-Control-Allow-Origin"] == "https://ops.example"
    assert pre.headers["Access-Control-Allow-Private-Network"] == "true"
    assert (
        "Access-Control-Allow-Origin"
        not in (await client.options("/prompt", headers={"Origin": "https://x.example"})).headers
    )
    star = await make_client(enable_cors_header="*")
    r = await star.post("/prompt", json={"prompt": simple_prompt()}, headers={"Origin": "null"})
    assert r.status == 403  # "*" means any real origin, not an opaque sandboxed one


def _png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (2, 2), (1, 2, 3)).save(buf, format="PNG")
    return buf.getvalue()


@pytest.mark.parametrize(
    "name,data",
    [
        ("evil.svg", SVG),
        ("evil.html", HTML),
        ("evil.htm", HTML),
        ("evil.xhtml", HTML),
        ("evil.js", b"alert(1)"),
        ("evil.xml", SVG),
    ],
)
async def test_active_uploads_are_served_as_inert_attachments(client, name, data):
    assert (await client.post("/upload/image", data=upload_form(data, name))).status == 200
    r = await client.get(f"/view?filename={name}&type=input")
    assert r.status == 200 and await r.read() == data
    assert r.headers["Content-Type"] == "application/octet-stream"
    assert r.headers["Content-Disposition"].startswith("attachment;")
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in r.headers["Content-Security-Policy"]
    assert (await client.post(f"/userdata/{name}", data=data)).status == 200
    r = await client.get(f"/userdata/{name}")
    assert r.status == 200 and r.headers["Content-Type"] == "application/octet-stream"
    assert r.headers["Content-Disposition"].startswith("attachment;")
    assert r.headers["X-Content-Type-Options"] == "nosniff" and "sandbox" in r.headers["Content-Security-Policy"]


async def test_images_stay_inline_with_nosniff_and_csp(client, workspace):
    png = _png()
    (workspace.input_dir / 'odd "na\nme" é.png').write_bytes(png)  # a name that would break the header
    r = await client.get("/view", params={"filename": 'odd "na\nme" é.png', "type": "input"})
    assert r.status == 200 and await r.read() == png
    assert (
        r.headers["Content-Disposition"]
        == "filename=\"odd _na_me_ _.png\"; filename*=UTF-8''odd%20%22na%0Ame%22%20%C3%A9.png"
    )
    assert (await client.post("/upload/image", data=upload_form(png, "pic.png"))).status == 200
    r = await client.get("/view?filename=pic.png&type=input")
    assert r.status == 200 and r.headers["Content-Type"] == "image/png"
    assert r.headers["Content-Disposition"] == 'filename="pic.png"'
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["Content-Security-Policy"].startswith("default-src 'none'")
    r = await client.get("/view?filename=pic.png&type=input&preview=webp;50")
    assert (
        r.status == 200
        and r.headers["Content-Type"] == "image/webp"
        and "sandbox" in r.headers["Content-Security-Policy"]
    )
    assert (await client.get("/view?filename=evil.svg&type=input")).status == 404
    assert (await client.post("/upload/image", data=upload_form(SVG, "s.svg"))).status == 200
    assert (await client.get("/view?filename=s.svg&type=input&preview=webp;50")).status == 400  # not a raster
    r = await client.get("/userdata/workflows%2Fnone.json")
    assert r.headers["X-Content-Type-Options"] == "nosniff"  # every answer, errors included


def test_allowed_hosts_flag_reaches_the_config():
    from comfy_bridge.cli import build_parser
    from comfy_bridge.cli import flags as cli_args

    args = cli_args.parse_known(
        build_parser(), ["serve", "--allowed-hosts", "a.example, .b.example", "--allowed-hosts", "c.example"]
    )
    assert args.allowed_hosts == ["a.example", ".b.example", "c.example"]
    assert cli_args.parse_known(build_parser(), ["serve"]).allowed_hosts == []
