"""`status` websocket messages are per tenant: a tenant's sockets hear of its own queue's changes only,
each with its own queue_remaining, never that another tenant queued, started or finished something."""

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
        if msg.type.name == "TEXT":
            into.append(json.loads(msg.data))
        elif msg.type.name in ("CLOSE", "CLOSED", "ERROR"):
            return


async def _seen(into: list, pred, start: int = 0, timeout: float = 20.0) -> int:
    """The index of the first message from `start` on that satisfies `pred` (waits for it)."""
    async with asyncio.timeout(timeout):
        while True:
            for i, m in enumerate(into[start:], start):
                if pred(m):
                    return i
            await asyncio.sleep(0.01)


def _status(remaining: int | None = None):
    return lambda m: (
        m["type"] == "status"
        and (remaining is None or m["data"]["status"]["exec_info"]["queue_remaining"] == remaining)
    )


async def test_a_tenant_hears_nothing_of_another_tenants_queue(hosted):
    alice, bob = hosted.add("alice"), hosted.add("bob")
    ws_a = await hosted.client.ws_connect("/ws?clientId=a", headers=alice)
    ws_b = await hosted.client.ws_connect("/ws?clientId=b", headers=bob)
    got_a, got_b, stop = [], [], asyncio.Event()
    tasks = [asyncio.create_task(_collect(ws_a, got_a, stop)), asyncio.create_task(_collect(ws_b, got_b, stop))]
    await _seen(got_a, _status())  # the greeting of each socket
    greeted = await _seen(got_b, _status()) + 1
    before = len(got_a)

    # Bob queues three prompts, one is deleted, two run: each change reaches bob ...
    for value in (1, 2, 3):
        await hosted.post_prompt(
            "bob", tn.prompt(value, prefix="bob", slow=0.2 if value == 1 else None), prompt_id=f"bob-{value}"
        )
    resp = await hosted.client.post("/queue", json={"delete": ["bob-3"]}, headers=bob)
    assert resp.status == 200
    await hosted.wait_history("bob", "bob-2")
    await _seen(got_b, _status(0), greeted)  # his last change is published: the one after his last prompt ran
    assert sum(_status()(m) for m in got_b[greeted:]) >= 6

    # ... and none reaches alice: the next status she gets is the one of her own prompt, queued now
    # (one publish loop sends in order, so one of bob's would have come first).
    await hosted.post_prompt("alice", tn.prompt(7, prefix="alice"), prompt_id="alice-1")
    own = await _seen(got_a, _status(), before)
    assert got_a[own]["data"]["status"]["exec_info"]["queue_remaining"] == 1, got_a[before:]
    await hosted.wait_history("alice", "alice-1")
    stop.set()
    await asyncio.gather(*tasks)
