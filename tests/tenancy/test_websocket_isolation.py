"""Websocket messages reach only the sockets of the tenant whose prompt produced them; a tenant
cannot take over another's client id, connected or not; queue counts are per tenant."""
from __future__ import annotations

import asyncio
import json

import tenant_nodes as tn


async def _collect(ws, into: list, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            msg = await ws.receive(timeout=0.1)
        except asyncio.TimeoutError:
            continue
        if msg.type.name != "TEXT":
            if msg.type.name in ("CLOSE", "CLOSED", "ERROR"):
                return
            into.append(msg.data)
            continue
        into.append(json.loads(msg.data))


async def test_messages_never_cross_tenants(hosted):
    alice, bob = hosted.add("alice"), hosted.add("bob")
    ws_a = await hosted.client.ws_connect("/ws?clientId=alicews", headers=alice)
    ws_b = await hosted.client.ws_connect("/ws?clientId=alicews", headers=bob)   # alice's id: refused
    got_a, got_b, stop = [], [], asyncio.Event()
    tasks = [asyncio.create_task(_collect(ws_a, got_a, stop)), asyncio.create_task(_collect(ws_b, got_b, stop))]
    await asyncio.sleep(0.1)
    out = await hosted.post_prompt("alice", tn.prompt(31, prefix="wsalice"), client_id="alicews")
    await hosted.wait_history("alice", out["prompt_id"])
    await asyncio.sleep(0.3)

    # Bob's socket was given its own id, and alice's prompt still reached alice.
    first_b = next(m for m in got_b if isinstance(m, dict) and m["type"] == "status")
    assert first_b["data"]["sid"] != "alicews"
    assert any(isinstance(m, dict) and m["type"] == "executed" and m["data"]["prompt_id"] == out["prompt_id"]
               for m in got_a)
    # Not one of alice's messages (or queue counts) reached bob.
    assert out["prompt_id"] not in json.dumps([m for m in got_b if isinstance(m, dict)])
    assert all(m["data"]["status"]["exec_info"]["queue_remaining"] == 0
               for m in got_b if isinstance(m, dict) and m["type"] == "status")
    assert any(m["data"]["status"]["exec_info"]["queue_remaining"] > 0
               for m in got_a if isinstance(m, dict) and m["type"] == "status")

    # Alice leaves; bob now claims her id: her next prompt's messages still do not reach him.
    await ws_a.close()
    await asyncio.sleep(0.1)
    ws_b2 = await hosted.client.ws_connect("/ws?clientId=alicews", headers=bob)
    got_b2 = []
    tasks.append(asyncio.create_task(_collect(ws_b2, got_b2, stop)))
    out2 = await hosted.post_prompt("alice", tn.prompt(32, prefix="wsalice2"), client_id="alicews")
    await hosted.wait_history("alice", out2["prompt_id"])
    await asyncio.sleep(0.3)
    stop.set()
    await asyncio.gather(*tasks)
    seen = json.dumps([m for m in got_b + got_b2 if isinstance(m, dict)])
    assert out2["prompt_id"] not in seen and "wsalice" not in seen
    assert not [m for m in got_b + got_b2 if not isinstance(m, dict)]   # no binary frames either
    await ws_b.close()
    await ws_b2.close()
