"""On a hosted server the Origin checks hold for every credential: a bearer key or a session
cookie sent from a foreign or opaque origin cannot queue, upload, log in or open the websocket,
while the same requests from the server's own origin (and from API clients that send no Origin)
go through."""

from __future__ import annotations

import aiohttp
import pytest
import tenant_nodes as tn

HOST = "10.1.2.3:8188"  # an address, not a loopback name: ComfyUI's loopback-only guard would not apply


async def test_foreign_origins_are_refused_with_keys_and_cookies(hosted):
    alice = hosted.add("alice")
    client = hosted.client
    login = await client.post("/login", json={"key": hosted.keys["alice"]}, headers={"Host": HOST})
    assert login.status == 200
    cookie = {"Cookie": f"comfy_cluster_session={login.cookies['comfy_cluster_session'].value}"}
    body = {"prompt": tn.prompt(1)}
    for credential in (alice, cookie):
        for origin in ("null", "https://attacker.example", "http://10.1.2.3:9999"):
            headers = {**credential, "Host": HOST, "Origin": origin}
            assert (await client.post("/prompt", json=body, headers=headers)).status == 403, origin
            form = aiohttp.FormData()
            form.add_field("image", b"x", filename="a.png")
            assert (await client.post("/upload/image", data=form, headers=headers)).status == 403
            with pytest.raises(aiohttp.WSServerHandshakeError) as err:
                await client.ws_connect("/ws", headers=headers)
            assert err.value.status == 403
        pending = (await (await client.get("/queue", headers=alice)).json())["queue_pending"]
        assert pending == []
    refused = await client.post("/login", json={"key": hosted.keys["alice"]}, headers={"Host": HOST, "Origin": "null"})
    assert refused.status == 403 and "comfy_cluster_session" not in refused.cookies
    for credential in (alice, cookie):
        ok = await client.post("/prompt", json=body, headers={**credential, "Host": HOST, "Origin": "http://" + HOST})
        assert ok.status == 200
    assert (await client.post("/prompt", json=body, headers=alice)).status == 200  # an API client: no Origin
