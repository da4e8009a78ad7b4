"""The data plane wired into the cluster: outputs stay in the producer's arena, a chained call forwards
the handle instead of the bytes, references are given up when the caller's copy dies, a lost
producer's tensors are re-sent from the caller's copy, and executors report their weights; through
shared memory, and with every pull over TCP."""

from __future__ import annotations

import asyncio
import gc
import os
import signal

import pytest
import torch

from cluster.dataplane import remote
from cluster.dataplane.caller_store import caller_store
from cluster.dataplane.refcounts import StaleHandle
from cluster.executor.local_cluster import start_local_cluster
from tests.cluster.cluster_fns import tiny_ref
from tests.cluster.test_local_cluster import FNS, expected, wait_until


@pytest.fixture(scope="module", params=["auto", "tcp"])
def cluster(request):
    """Two executors; with `tcp`, every pull between the processes goes over the producers' data sockets
    (the cross-host path), and each test below holds there too."""
    before = remote.mode()
    remote.set_mode(request.param)  # the executors inherit it
    head, rt = start_local_cluster(
        2, threads_per_executor=1, preload=[FNS], heartbeat_s=0.2, lost_after_s=5.0, deadline_s=60.0
    )
    yield head, rt
    head.stop()
    remote.set_mode(before)


async def test_chained_call_forwards_the_producers_handle(cluster, fixed_threads):
    head, rt = cluster
    store = caller_store()
    x = torch.randn(2, 16, generator=torch.Generator().manual_seed(1))
    y = (await rt.call("cc_test_linear", tiny_ref(2), {"x": x}, {}))["y"]
    handle = store.forwardable(y, set(head.executors))
    assert handle is not None and handle.owner in head.executors and handle.refs
    forwarded = store.forwarded
    z = (await rt.call("cc_test_linear", tiny_ref(3), {"x": y}, {}))["y"]
    assert store.forwarded == forwarded + 1
    assert torch.equal(z, expected(expected(x, 2, 1.0), 3, 1.0))


async def test_an_output_changed_in_place_is_sent_as_it_is_now(cluster, fixed_threads):
    head, rt = cluster
    store = caller_store()
    x = torch.randn(2, 16, generator=torch.Generator().manual_seed(4))
    y = (await rt.call("cc_test_linear", tiny_ref(5), {"x": x}, {}))["y"]
    y.mul_(2.0)
    assert store.forwardable(y) is None
    forwarded = store.forwarded
    z = (await rt.call("cc_test_linear", tiny_ref(5), {"x": y}, {}))["y"]
    assert store.forwarded == forwarded
    assert torch.equal(z, expected(expected(x, 5, 1.0) * 2.0, 5, 1.0))


async def test_the_reference_is_released_when_the_callers_copy_dies(cluster):
    head, rt = cluster
    store = caller_store()
    y = (await rt.call("cc_test_linear", tiny_ref(6), {"x": torch.ones(1, 16)}, {}))["y"]
    handle = store.forwardable(y)
    store.store.clients.check(handle.refs, handle.slot, handle.generation)  # live while y lives
    del y
    gc.collect()
    store.collect()
    with pytest.raises(StaleHandle):
        store.store.clients.check(handle.refs, handle.slot, handle.generation)


async def test_outputs_of_a_lost_producer_are_resent_from_the_callers_copy(cluster, fixed_threads):
    head, rt = cluster
    wait_until(lambda: len(head.executors) == 2)
    x = torch.randn(3, 16, generator=torch.Generator().manual_seed(8))
    y = (await rt.call("cc_test_linear", tiny_ref(9), {"x": x}, {}))["y"]
    owner = caller_store().forwardable(y).owner
    pid = head.executors[owner].pid
    os.kill(pid, signal.SIGKILL)
    await asyncio.to_thread(wait_until, lambda: owner not in head.executors)
    z = (await rt.call("cc_test_linear", tiny_ref(10), {"x": y}, {}))["y"]
    assert torch.equal(z, expected(expected(x, 9, 1.0), 10, 1.0))
    await asyncio.to_thread(wait_until, lambda: len(head.executors) == 2)  # the supervisor replaced it


async def test_executors_report_resident_weights_and_memory(cluster):
    head, rt = cluster
    await rt.call("cc_test_linear", tiny_ref(11), {"x": torch.ones(1, 16)}, {})
    stats = head.stats()
    holders = [e for e in stats["executors"] if tiny_ref(11).key in e["cached_models"]]
    assert len(holders) >= 1
    # the arena is part of the budget, the cached weights on top of it
    assert all(e["memory_used"] > (64 << 20) for e in holders)


async def test_pulls_between_processes_take_the_modes_path(cluster):
    head, rt = cluster
    mine = caller_store().store.stats

    def executors(kind: str) -> int:
        return sum(e["pulls"][kind] for e in head.stats()["executors"])

    before = (mine.shm_pulls, mine.tcp_pulls, executors("shm"), executors("tcp"))
    await rt.call("cc_test_linear", tiny_ref(12), {"x": torch.ones(2, 16)}, {})  # one pull each way
    after = (mine.shm_pulls, mine.tcp_pulls, executors("shm"), executors("tcp"))
    moved = [a - b for a, b in zip(after, before)]
    assert moved == ([0, 1, 0, 1] if remote.mode() == "tcp" else [1, 0, 1, 0])
