"""Warm wait on the real dispatch path: an invocation whose weights only a busy executor holds waits
for it when it is expected to be free before loading elsewhere would finish, loads on the free
executor when the holder is busy for longer (expected, or in fact), never waits when the policy is
off, and a parked invocation of a cancelled request is dropped without hanging anything."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid

import pytest
import torch

from cluster.cluster_runtime import ClusterRuntime
from cluster.control.errors import RequestCancelled
from cluster.executor.local_cluster import start_local_cluster
from cluster.scheduling.costs import shape_signature
from cluster.scheduling.warm_wait import WarmWaitPolicy
from tests.cluster.cluster_fns import slow_ref

FNS = "tests.cluster.cluster_fns"
FN = "cc_test_slow_load"
LOAD_S = 2.0  # what loading the test model takes on a cold executor
WARM = torch.ones(2, 16)  # the first call, which loads the model
SHORT = torch.ones(1, 16)  # inputs the tests price as a short run
LONG = torch.ones(3, 16)  # and as a long one
HANG_S = 60.0  # upper bound against hangs only
_seeds = itertools.count(1000)  # a model of its own per test: no executor holds it yet


@pytest.fixture(scope="module")
def cluster():
    head, _ = start_local_cluster(2, threads_per_executor=1, preload=[FNS], deadline_s=HANG_S)
    yield head
    head.stop()


class Observed(ClusterRuntime):
    """A ClusterRuntime (a request of its own) that keeps the head's Result of each call."""

    def __init__(self, head, tenant: str = "warm") -> None:
        super().__init__(head, tenant, uuid.uuid4().hex)
        self.results: list = []

    def _read(self, store, result):
        self.results.append(result)
        return super()._read(store, result)

    @property
    def executor(self) -> str:
        [result] = self.results
        return result.executor


def price(head, model, x: torch.Tensor, seconds: float) -> None:
    """Make the head expect a call on inputs shaped like `x` to run `seconds`. A GPU executor
    measures wall time; these CPU executors measure the sleeping ModelFn's CPU time, near zero."""
    head.costs.observe(FN, model.key, shape_signature({"x": x}), seconds)


async def warm_up(head, model) -> str:
    """Run one call so that an executor holds the model and the head learns its load time."""
    rt = Observed(head)
    await asyncio.wait_for(rt.call(FN, model, {"x": WARM}), HANG_S)
    assert head.stats()["warm_wait"]["load_s"][model.key] >= LOAD_S
    return rt.executor


async def warm_model(head, x: torch.Tensor, seconds: float):
    """A model no executor holds yet, loaded by one warm-up call and priced to run `seconds` on inputs
    shaped like `x`; the model and the executor that holds it."""
    model = slow_ref(next(_seeds), LOAD_S)
    holder = await warm_up(head, model)
    price(head, model, x, seconds)
    return model, holder


async def until(pred, timeout: float = HANG_S) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "condition not reached"
        await asyncio.sleep(0.01)


def running_on(head, ex_id: str) -> bool:
    return any(e["id"] == ex_id and e["running"] for e in head.stats()["executors"])


def holders(head, key: str) -> set[str]:
    return {e["id"] for e in head.stats()["executors"] if key in e["cached_models"]}


def counters(head) -> tuple[int, int]:
    s = head.stats()
    return s["warm_waits"], s["warm_wait_hits"]


async def start_busy(head, model, x: torch.Tensor, sleep: float, holder: str) -> asyncio.Task:
    """A call that keeps the holder busy for `sleep` seconds; returns once it runs there."""
    task = asyncio.create_task(Observed(head).call(FN, model, {"x": x}, {"sleep": sleep}))
    await until(lambda: running_on(head, holder))
    return task


async def call_beside_busy_holder(head, model, x: torch.Tensor, sleep: float, holder: str) -> Observed:
    """Keep the holder busy for `sleep` seconds with an `x` call, meanwhile call the model again; the
    second call's runtime (which executor answered) once both have finished."""
    busy = await start_busy(head, model, x, sleep, holder)
    second = Observed(head)
    t0 = time.monotonic()
    await asyncio.wait_for(second.call(FN, model, {"x": SHORT}), HANG_S)
    print(f"second call answered in {time.monotonic() - t0:.3f}s (load time {LOAD_S}s)")
    await asyncio.wait_for(busy, HANG_S)
    return second


def assert_loaded_elsewhere_without_waiting(
    head, model, holder: str, second: Observed, counts_before: tuple[int, int]
) -> None:
    assert second.executor != holder
    assert counters(head) == counts_before  # nothing parked
    assert holders(head, model.key) == {holder, second.executor}


async def test_a_call_waits_for_the_busy_executor_holding_its_weights(cluster):
    head = cluster
    model, a = await warm_model(head, SHORT, 0.3)  # the holder is expected free long before a load ends
    waits, hits = counters(head)
    second = await call_beside_busy_holder(head, model, SHORT, 0.3, a)
    assert second.executor == a
    assert counters(head) == (waits + 1, hits + 1)
    assert holders(head, model.key) == {a}  # the free executor never loaded the model
    assert head.stats()["parked"] == 0


async def test_a_holder_expected_busy_longer_than_the_load_sends_the_call_to_the_free_executor(cluster):
    head = cluster
    model, a = await warm_model(head, LONG, 3 * LOAD_S)
    waits, hits = counters(head)
    second = await call_beside_busy_holder(head, model, LONG, 1.0, a)
    assert_loaded_elsewhere_without_waiting(head, model, a, second, (waits, hits))


async def test_with_warm_wait_off_a_call_never_waits(cluster):
    head = cluster
    model, a = await warm_model(head, SHORT, 0.3)
    waits, hits = counters(head)
    head.warm_wait = WarmWaitPolicy(enabled=False)
    try:
        second = await call_beside_busy_holder(head, model, SHORT, 0.3, a)
    finally:
        head.warm_wait = WarmWaitPolicy()
    assert_loaded_elsewhere_without_waiting(head, model, a, second, (waits, hits))


async def test_a_spread_call_never_waits_and_idle_executors_count_only_free_ones(cluster):
    """A CFG split's side (spread) is meant to run beside the other side at once: it loads on the free executor
    rather than waiting for the busy holder, where a plain call would wait (the first test above)."""
    head = cluster
    model, a = await warm_model(head, SHORT, 0.3)
    waits, hits = counters(head)
    assert head.idle_executors() == 2
    busy = await start_busy(head, model, SHORT, 0.3, a)
    assert head.idle_executors() == 1
    second = Observed(head)
    await asyncio.wait_for(second.call(FN, model, {"x": SHORT}, spread=True), HANG_S)
    await asyncio.wait_for(busy, HANG_S)
    assert_loaded_elsewhere_without_waiting(head, model, a, second, (waits, hits))


async def test_a_parked_call_of_a_cancelled_request_is_dropped(cluster):
    head = cluster
    model, a = await warm_model(head, SHORT, 0.3)
    waits, _ = counters(head)
    busy = await start_busy(head, model, SHORT, 1.5, a)
    second = Observed(head, tenant="cancels")
    parked = asyncio.create_task(second.call(FN, model, {"x": SHORT}))
    await until(lambda: head.stats()["parked"] == 1)
    second.cancel("test")
    with pytest.raises(RequestCancelled):
        await asyncio.wait_for(parked, HANG_S)
    assert head.stats()["parked"] == 0
    await asyncio.wait_for(busy, HANG_S)
    tenant = head.stats()["tenants"]["cancels"]
    assert (tenant["queued"], tenant["running"]) == (0, 0)  # its charge was settled, not left running
    assert counters(head)[0] == waits + 1
    assert holders(head, model.key) == {a}


async def test_a_parked_call_whose_holder_stays_busy_past_the_load_time_loads_elsewhere(cluster):
    head = cluster
    model, a = await warm_model(head, SHORT, 0.3)  # expected short, so the call parks; it runs far longer
    waits, hits = counters(head)
    second = await call_beside_busy_holder(head, model, SHORT, 2 * LOAD_S, a)
    assert second.executor != a
    assert counters(head) == (waits + 1, hits)
    assert holders(head, model.key) == {a, second.executor}


async def test_a_call_sent_to_a_cold_executor_is_charged_its_load_at_dispatch(cluster):
    head = cluster
    model, a = await warm_model(head, LONG, 3 * LOAD_S)  # too long to wait for: the call loads elsewhere
    busy = await start_busy(head, model, LONG, 1.0, a)
    cold = Observed(head, tenant="cold-start")
    call = asyncio.create_task(cold.call(FN, model, {"x": LONG}))

    def sent() -> list:  # the head charges a job before it puts it in flight
        return [
            j for e in list(head.executors.values()) for j in list(e.inflight.values()) if j.inv.tenant == "cold-start"
        ]

    await until(lambda: bool(sent()))
    [job] = sent()
    assert job.inv.charged == pytest.approx(3 * LOAD_S + head.stats()["warm_wait"]["load_s"][model.key])
    await asyncio.wait_for(call, HANG_S)
    await asyncio.wait_for(busy, HANG_S)
    assert cold.executor != a
    # the completion corrects it to what the executor measured (a sleeping CPU ModelFn: about its load)
    assert job.inv.charged == pytest.approx(cold.results[0].measured_s)
