"""The browser path: an unauthenticated page visit goes to /login, a key turns into an HttpOnly,
SameSite=Strict session cookie that the web UI's HTTP calls and websocket then carry; the cookie
is refused cross-origin (CSRF), and logout or revocation ends it."""

from __future__ import annotations

from urllib.parse import unquote

import aiohttp
import pytest

from comfy_bridge.tenancy.auth import COOKIE


async def test_login_sets_a_session_cookie_the_ui_and_websocket_use(hosted):
    hosted.add("alice")
    client = hosted.client
    resp = await client.get("/", headers={"Accept": "text/html"}, allow_redirects=False)
    assert resp.status == 303 and unquote(resp.headers["Location"]) == "/login?next=/"
    page = await client.get("/login")
    assert page.status == 200 and 'name="key"' in await page.text()

    bad = await client.post("/login", data={"key": "cc_000000000000_" + "y" * 43}, allow_redirects=False)
    assert bad.status == 401 and COOKIE not in bad.cookies
    good = await client.post("/login", data={"key": hosted.keys["alice"], "next": "/"}, allow_redirects=False)
    assert good.status == 303 and good.headers["Location"] == "/"
    set_cookie = good.headers["Set-Cookie"]
    assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie
    assert hosted.keys["alice"] not in set_cookie
    cookie = {"Cookie": f"{COOKIE}={good.cookies[COOKIE].value}"}
    client.session.cookie_jar.clear()  # send only the cookie under test

    assert (await client.get("/", headers=cookie)).status == 200
    assert (await client.get("/queue", headers=cookie)).status == 200
    host = f"http://{client.host}:{client.port}"
    same = {**cookie, "Origin": host}
    resp = await client.post(
        "/prompt", json={"prompt": {"1": {"class_type": "TNumber", "inputs": {"value": 1}}}}, headers=same
    )
    assert resp.status == 400  # reached the route (no outputs), not refused by auth
    ws = await client.ws_connect("/ws", headers=same)
    msg = await ws.receive_json(timeout=5)
    assert msg["type"] == "status"
    await ws.close()

    for origin in ("http://evil.example", "null"):
        assert (await client.post("/queue", json={"clear": True}, headers={**cookie, "Origin": origin})).status == 403
        with pytest.raises(aiohttp.WSServerHandshakeError):
            await client.ws_connect("/ws", headers={**cookie, "Origin": origin})
    assert (
        await client.post("/login", data={"key": hosted.keys["alice"]}, headers={"Origin": "http://evil.example"})
    ).status == 403
    off_site = await client.post(
        "/login", data={"key": hosted.keys["alice"], "next": "//evil.example/"}, allow_redirects=False
    )
    assert off_site.headers["Location"] == "/"
    client.session.cookie_jar.clear()

    assert (await client.post("/logout", headers=cookie)).status == 200
    assert (await client.get("/queue", headers=cookie)).status == 401


async def test_revoking_the_key_ends_its_sessions(hosted):
    hosted.add("alice")
    good = await hosted.client.post("/login", json={"key": hosted.keys["alice"]})
    assert good.status == 200 and (await good.json())["tenant"] == "alice"
    cookie = {"Cookie": f"{COOKIE}={good.cookies[COOKIE].value}"}
    hosted.client.session.cookie_jar.clear()
    assert (await hosted.client.get("/queue", headers=cookie)).status == 200
    hosted.store.revoke("alice")
    assert (await hosted.client.get("/queue", headers=cookie)).status == 401
    assert (await hosted.client.get("/queue", headers=hosted.auth("alice"))).status == 401


@pytest.mark.parametrize(
    "next_",
    [
        "/\t/evil.example",
        "/\n/evil.example",
        "/\r\n/evil.example",
        " //evil.example",
        "/ /evil.example",
        "/\x00/evil.example",
        "/\x7f/evil.example",
        "/\\evil.example",
        "\\/evil.example",
        "///evil.example",
        "https://evil.example/",
        "javascript:alert(1)",
        "/\u3000/evil.example",
        "/\u2028/evil.example",
    ],
)
async def test_login_never_redirects_off_site_after_url_normalisation(hosted, next_):
    """Browsers drop tabs and newlines from a URL and read `\\` as `/`: `/\\t/evil` is `//evil`."""
    hosted.add("alice")
    page = await hosted.client.get("/login", params={"next": next_})
    assert 'name="next" value="/"' in await page.text()
    resp = await hosted.client.post("/login", data={"key": hosted.keys["alice"], "next": next_}, allow_redirects=False)
    assert resp.status == 303 and resp.headers["Location"] == "/"


async def test_login_keeps_a_same_origin_next_path(hosted):
    hosted.add("alice")
    resp = await hosted.client.post(
        "/login", data={"key": hosted.keys["alice"], "next": "/view?filename=ü.png"}, allow_redirects=False
    )
    assert resp.status == 303 and resp.headers["Location"] == "/view?filename=%C3%BC.png"
