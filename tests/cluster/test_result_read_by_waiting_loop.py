"""`Head.result`: a loop awaiting invocations reads the head's socket itself while it waits, and stops
watching it when its last invocation returns."""
from __future__ import annotations

import asyncio

import pytest
import torch

from cluster.local_cluster import start_local_cluster
from tests.cluster.cluster_fns import tiny_ref

FNS = "tests.cluster.cluster_fns"


@pytest.fixture(scope="module")
def cluster():
    head, rt = start_local_cluster(1, threads_per_executor=1, preload=[FNS], heartbeat_s=0.2)
    yield head, rt
    head.stop()


def _watching(loop: asyncio.AbstractEventLoop, fd: int) -> bool:
    return fd in {key.fd for key in loop._selector.get_map().values()}   # noqa: SLF001 - what the test is about


async def test_the_loop_watches_the_socket_only_while_it_awaits_results(cluster):
    head, rt = cluster
    loop = asyncio.get_running_loop()
    seen: list[bool] = []

    async def one(i: int) -> torch.Tensor:
        out = await rt.call("cc_test_linear", tiny_ref(1), {"x": torch.full((1, 16), float(i))}, {"sleep": 0.05})
        seen.append(_watching(loop, head._fd))   # the others are still waiting
        return out["y"]

    outs = await asyncio.gather(*[one(i) for i in range(6)])
    assert seen[:5] == [True] * 5          # watched while any call of this loop was outstanding
    assert not _watching(loop, head._fd)   # and no longer once all returned
    assert loop not in head._readers
    for i, y in enumerate(outs):           # every result reached its own caller
        ref = await rt.call("cc_test_linear", tiny_ref(1), {"x": torch.full((1, 16), float(i))}, {})
        assert torch.equal(y, ref["y"])


async def test_a_failed_call_stops_the_watch_too(cluster):
    head, rt = cluster
    with pytest.raises(Exception, match="bad input of shape"):
        await rt.call("cc_test_raise", None, {"x": torch.ones(2)}, {})
    assert asyncio.get_running_loop() not in head._readers
