"""`Head.result`: a loop awaiting invocations reads the head's socket itself while it waits, keeps
watching it through a chain of calls, and stops once its last invocation has returned; the head
thread leaves the socket to such loops and watches it again when none is left."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import torch

from cluster.call import NoParams, pack
from cluster.executor.local_cluster import start_local_cluster
from tests.cluster.cluster_fns import tiny_ref

FNS = "tests.cluster.cluster_fns"


@pytest.fixture(scope="module")
def cluster():
    head, rt = start_local_cluster(1, threads_per_executor=1, preload=[FNS], heartbeat_s=0.2)
    yield head, rt
    head.stop()


def _watching(loop: asyncio.AbstractEventLoop, fd: int) -> bool:
    return fd in {key.fd for key in loop._selector.get_map().values()}  # noqa: SLF001 - what the test is about


async def test_the_loop_watches_the_socket_only_while_it_awaits_results(cluster):
    head, rt = cluster
    loop = asyncio.get_running_loop()
    seen: list[bool] = []

    async def one(i: int) -> torch.Tensor:
        out = await rt.call("cc_test_linear", tiny_ref(1), {"x": torch.full((1, 16), float(i))}, {"sleep": 0.05})
        seen.append(_watching(loop, head.transport.fd))  # the others are still waiting
        return out["y"]

    outs = await asyncio.gather(*[one(i) for i in range(6)])
    assert seen[:5] == [True] * 5  # watched while any call of this loop was outstanding
    await asyncio.sleep(0)  # the watch ends on the loop's next step
    assert not _watching(loop, head.transport.fd)  # and no longer once all returned
    assert loop not in head.readers
    for i, y in enumerate(outs):  # every result reached its own caller
        ref = await rt.call("cc_test_linear", tiny_ref(1), {"x": torch.full((1, 16), float(i))}, {})
        assert torch.equal(y, ref["y"])


async def test_a_failed_call_stops_the_watch_too(cluster):
    head, rt = cluster
    with pytest.raises(Exception, match="bad input of shape"):
        await rt.call("cc_test_raise", None, {"x": torch.ones(2)}, {})
    await asyncio.sleep(0)
    assert asyncio.get_running_loop() not in head.readers


async def test_a_chain_of_calls_starts_watching_once(cluster):
    head, rt = cluster
    loop = asyncio.get_running_loop()
    added = []
    add_reader = loop.add_reader
    loop.add_reader = lambda fd, *args: (added.append(fd), add_reader(fd, *args))
    try:
        for i in range(5):  # each call awaits the previous one, like denoising steps
            await rt.call("cc_test_linear", tiny_ref(1), {"x": torch.full((1, 16), float(i))}, {})
            assert _watching(loop, head.transport.fd)
    finally:
        loop.add_reader = add_reader
    assert added == [head.transport.fd]
    await asyncio.sleep(0)
    assert not _watching(loop, head.transport.fd)


def test_the_head_thread_reads_replies_again_once_no_loop_does():
    # A 60 s tick: were the head thread not woken when the last loop stops reading, the reply to a
    # plain `submit` below would wait for the tick.
    head, rt = start_local_cluster(1, threads_per_executor=1, preload=[FNS], tick_s=60.0)
    try:

        async def two():  # the first reply wakes the head thread, which sees this loop reading
            return await asyncio.gather(
                *(rt.call("cc_test_linear", tiny_ref(1), {"x": torch.ones(1, 16)}, {"sleep": s}) for s in (0.0, 0.5))
            )

        asyncio.run(two())
        assert not head.readers
        future = head.submit(
            tenant="t",
            request=uuid.uuid4().hex,
            fn="cc_test_raise",
            model_key="",
            call=pack("cc_test_raise", None, NoParams()),
            inputs={},
            nulls=["x"],
        )
        assert future.exception(timeout=20) is not None  # the ModelFn's error, read by the head thread
    finally:
        head.stop()
