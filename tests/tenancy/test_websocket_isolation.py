"""Websocket messages reach only the sockets of the tenant whose prompt produced them; client ids
are scoped to their tenant, so none can take, squat on or observe another's, connected or not;
queue counts are per tenant."""

from __future__ import annotations

import asyncio
import json

import tenant_nodes as tn


async def _collect(ws, into: list, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            msg = await ws.receive(timeout=0.1)
        except TimeoutError:
            continue
        if msg.type.name != "TEXT":
            if msg.type.name in ("CLOSE", "CLOSED", "ERROR"):
                return
            into.append(msg.data)
            continue
        into.append(json.loads(msg.data))


async def _seen(into: list, pred, timeout: float = 20.0) -> None:
    """Wait until a collected message satisfies `pred` (a condition, never a fixed sleep)."""
    async with asyncio.timeout(timeout):
        while not any(isinstance(m, dict) and pred(m) for m in into):
            await asyncio.sleep(0.01)


def _finished(prompt_id: str):
    return lambda m: m["type"] == "execution_success" and m["data"]["prompt_id"] == prompt_id


def _status(m: dict) -> bool:
    return m["type"] == "status"


async def test_messages_never_cross_tenants(hosted):
    alice, bob = hosted.add("alice"), hosted.add("bob")
    ws_a = await hosted.client.ws_connect("/ws?clientId=alicews", headers=alice)
    ws_b = await hosted.client.ws_connect("/ws?clientId=alicews", headers=bob)  # the same id, in bob's scope
    got_a, got_b, stop = [], [], asyncio.Event()
    tasks = [asyncio.create_task(_collect(ws_a, got_a, stop)), asyncio.create_task(_collect(ws_b, got_b, stop))]
    await _seen(got_a, _status)  # both sockets registered
    await _seen(got_b, _status)
    out = await hosted.post_prompt("alice", tn.prompt(31, prefix="wsalice"), client_id="alicews")
    await _seen(got_a, _finished(out["prompt_id"]))
    # One publish loop sends in order: once bob's own prompt has reached him, anything of alice's
    # addressed to his socket would have arrived before it.
    before_mine = len(got_b)  # the queue counts bob saw while only alice had work
    mine = await hosted.post_prompt("bob", tn.prompt(33, prefix="wsbob"), client_id="alicews")
    await _seen(got_b, _finished(mine["prompt_id"]))

    # Bob's socket keeps the id he asked for, which names his socket only, and alice's prompt still
    # reached alice.
    first_b = next(m for m in got_b if isinstance(m, dict) and m["type"] == "status")
    assert first_b["data"]["sid"] == "alicews"
    assert any(
        isinstance(m, dict) and m["type"] == "executed" and m["data"]["prompt_id"] == out["prompt_id"] for m in got_a
    )
    # Not one of alice's messages (or queue counts) reached bob.
    assert out["prompt_id"] not in json.dumps([m for m in got_b if isinstance(m, dict)])
    assert all(
        m["data"]["status"]["exec_info"]["queue_remaining"] == 0
        for m in got_b[:before_mine]
        if isinstance(m, dict) and m["type"] == "status"
    )
    assert any(
        m["data"]["status"]["exec_info"]["queue_remaining"] > 0
        for m in got_a
        if isinstance(m, dict) and m["type"] == "status"
    )

    # Alice leaves; bob now claims her id: her next prompt's messages still do not reach him.
    await ws_a.close()
    ws_b2 = await hosted.client.ws_connect("/ws?clientId=alicews", headers=bob)
    got_b2 = []
    tasks.append(asyncio.create_task(_collect(ws_b2, got_b2, stop)))
    await _seen(got_b2, _status)
    out2 = await hosted.post_prompt("alice", tn.prompt(32, prefix="wsalice2"), client_id="alicews")
    await hosted.wait_history("alice", out2["prompt_id"])
    mine2 = await hosted.post_prompt("bob", tn.prompt(34, prefix="wsbob2"), client_id="alicews")
    await _seen(got_b2, _finished(mine2["prompt_id"]))
    stop.set()
    await asyncio.gather(*tasks)
    seen = json.dumps([m for m in got_b + got_b2 if isinstance(m, dict)])
    assert out2["prompt_id"] not in seen and "wsalice" not in seen
    assert not [m for m in got_b + got_b2 if not isinstance(m, dict)]  # no binary frames either
    await ws_b.close()
    await ws_b2.close()


async def _until(ws, done, into: list, timeout: float = 20.0) -> None:
    """Receive text messages into `into` until `done(message)`."""
    async with asyncio.timeout(timeout):
        while True:
            msg = await ws.receive()
            assert msg.type.name in ("TEXT", "BINARY"), msg
            if msg.type.name == "TEXT":
                into.append(json.loads(msg.data))
                if done(into[-1]):
                    return


def _success(prompt_id: str):
    return lambda m: m["type"] == "execution_success" and m["data"]["prompt_id"] == prompt_id


async def test_a_client_id_taken_first_by_another_tenant_still_reaches_its_owner(hosted):
    """Client ids are scoped to their tenant: bob squatting on an id first neither silences alice
    under it nor shows him her messages; each keeps the id asked for."""
    alice, bob = hosted.add("alice"), hosted.add("bob")
    ws_b = await hosted.client.ws_connect("/ws?clientId=shared", headers=bob)
    ws_a = await hosted.client.ws_connect("/ws?clientId=shared", headers=alice)
    got_a, got_b = [], []
    await _until(ws_b, lambda m: m["type"] == "status", got_b)
    await _until(ws_a, lambda m: m["type"] == "status", got_a)
    assert got_a[0]["data"]["sid"] == "shared" and got_b[0]["data"]["sid"] == "shared"

    out = await hosted.post_prompt("alice", tn.prompt(41, prefix="squat_a"), client_id="shared")
    await _until(ws_a, _success(out["prompt_id"]), got_a)
    assert any(m["type"] == "executed" and m["data"]["prompt_id"] == out["prompt_id"] for m in got_a)
    # Bob's own prompt ends his stream: one publish loop sends in order, so anything of alice's
    # meant for him would have come before it.
    own = await hosted.post_prompt("bob", tn.prompt(42, prefix="squat_b"), client_id="shared")
    await _until(ws_b, _success(own["prompt_id"]), got_b)
    seen_by_bob = json.dumps(got_b)
    assert out["prompt_id"] not in seen_by_bob and "squat_a" not in seen_by_bob
    assert own["prompt_id"] not in json.dumps(got_a)
    await ws_a.close()
    await ws_b.close()
