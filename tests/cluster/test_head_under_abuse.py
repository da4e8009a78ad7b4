"""The head keeps serving everyone else when one tenant floods it with 10,000 prompts' worth of
invocations, and when an executor disconnects in the middle of a message."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import socket
import time

import pytest
import torch
import zmq

from cluster import messages as m
from cluster.call import pack
from cluster.control.errors import RequestCancelled
from cluster.dataplane.caller_store import caller_store
from cluster.executor.local_cluster import start_local_cluster
from tests.cluster.cluster_fns import LinearParams, tiny_ref
from tests.cluster.test_local_cluster import FNS, expected, wait_until


@pytest.fixture(scope="module")
def cluster():
    head, rt = start_local_cluster(
        1, threads_per_executor=1, preload=[FNS], heartbeat_s=0.2, lost_after_s=5.0, deadline_s=60.0, delta=0.05
    )
    yield head, rt
    head.stop()


async def test_a_flooding_tenant_does_not_hold_up_another(cluster, fixed_threads):
    head, rt = cluster
    store = caller_store()
    x = store.hold(torch.ones(1, 16))  # one input shared by every flood invocation
    ref = tiny_ref(0)
    call = pack("cc_test_linear", ref, LinearParams())
    try:
        flood = [
            head.submit(
                tenant="flood",
                request=f"flood-{i}",
                fn="cc_test_linear",
                model_key=ref.key,
                call=call,
                inputs={"x": x},
                nulls=[],
            )
            for i in range(10_000)
        ]
        for f in flood:  # a caller that does not read the outputs gives their references back
            f.add_done_callback(
                lambda f: f.exception() is None and [store.release(meta) for meta in f.result().outputs.values()]
            )
        await asyncio.to_thread(wait_until, lambda: sum(f.done() for f in flood) >= 10)  # flood is running
        v = torch.randn(2, 16, generator=torch.Generator().manual_seed(5))
        out = await asyncio.wait_for(rt.bind("victim", "v-1").call("cc_test_linear", tiny_ref(1), {"x": v}, {}), 120)
        finished_before_victim = sum(f.done() for f in flood)
        assert torch.equal(out["y"], expected(v, 1, 1.0))
        # fair share: the victim waited for about delta's worth of the flood, not for the flood
        assert finished_before_victim < 2_000
        for i in range(10_000):
            head.cancel_request(f"flood-{i}", "test over")
        done, pending = await asyncio.to_thread(cf.wait, flood, 60)
        assert not pending
        outcomes = {type(f.exception()) for f in flood}
        assert outcomes <= {type(None), RequestCancelled} and RequestCancelled in outcomes
        assert head.stats()["tenants"]["victim"]["queued"] == 0
    finally:
        store.release(x)


def _await_dispatch(fake: zmq.Socket, model_key: str, timeout_s: float = 60.0) -> m.Dispatch:
    """Waits as a live executor would: heartbeats keep it from being declared lost while a loaded
    machine takes its time to place the call (without them the head drops it after lost_after_s)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if fake.poll(200):
            msg = m.executor_decoder.decode(fake.recv())
            if isinstance(msg, m.Dispatch):
                return msg
        else:
            fake.send(m.encode(m.Heartbeat(0, 0, [model_key])))
    raise AssertionError(f"no Dispatch reached the fake executor in {timeout_s} s")


def _await_membership(head, fake: zmq.Socket, model_key: str, timeout_s: float = 60.0) -> None:
    """Until the head lists the fake executor as a member, heartbeating as a live one would."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if "half-sender" in [e["id"] for e in head.stats()["executors"]]:
            return
        fake.send(m.encode(m.Heartbeat(0, 0, [model_key])))
        time.sleep(0.05)
    raise AssertionError(f"the head did not admit the fake executor in {timeout_s} s")


async def test_an_executor_that_disconnects_mid_message_loses_only_its_work(cluster, fixed_threads):
    head, rt = cluster
    bad_before = head.stats().get("bad_messages", 0)
    ref = tiny_ref(77)
    fake = zmq.Context.instance().socket(zmq.DEALER)
    fake.setsockopt(zmq.IDENTITY, b"half-sender")
    fake.setsockopt(zmq.LINGER, 2000)
    fake.connect(head.address)
    # it claims the weights, so the head places the call on it
    fake.send(m.encode(m.Register("half-sender", "elsewhere", 1, "cpu", 1, 1 << 30, 0, [ref.key], "cc-half-sender-")))
    # submitted before the head has read the registration, the call would go to the real executor
    await asyncio.to_thread(_await_membership, head, fake, ref.key)
    x = torch.randn(3, 16, generator=torch.Generator().manual_seed(6))
    call = asyncio.ensure_future(rt.bind("t-half", "req-half").call("cc_test_linear", ref, {"x": x}, {}))
    msg = await asyncio.to_thread(_await_dispatch, fake, ref.key)
    done = m.encode(m.Done(msg.dispatch_id, {}, [], 0.01, 0.01, 0.0, 0, [ref.key]))
    fake.send(done[: len(done) // 2])  # the first half of its reply, then it is gone
    fake.close()
    # a peer that drops the connection inside the transport's own framing
    if head.address.startswith("ipc://"):
        raw = socket.socket(socket.AF_UNIX)
        raw.connect(head.address[len("ipc://") :])
        raw.sendall(b"\xff\x00\x00\x00\x00\x00\x00\x00\x01\x7f\x03")  # a truncated ZMTP greeting
        raw.close()
    out = await asyncio.wait_for(call, 60)
    assert torch.equal(out["y"], expected(x, 77, 1.0))
    stats = head.stats()
    assert stats["bad_messages"] >= bad_before + 1
    assert "half-sender" not in [e["id"] for e in stats["executors"]]
    assert len(stats["executors"]) == 1
