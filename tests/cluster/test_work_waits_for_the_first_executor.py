"""A head started without waiting for its executors (what `serve` does, so that it listens while they
import their model code) takes invocations at once: they wait in its queue and run the moment an
executor registers."""

from __future__ import annotations

import asyncio

import torch

from cluster.executor.local_cluster import start_local_cluster
from cluster.local import LocalRuntime
from tests.cluster.cluster_fns import WARM_GATE_ENV, tiny_ref

FNS = "tests.cluster.cluster_fns"


async def test_an_invocation_submitted_before_any_executor_registered_runs_once_one_does(tmp_path, fixed_threads):
    gate = tmp_path / "registering"
    head, rt = start_local_cluster(
        1, threads_per_executor=1, preload=[FNS], warm_up=True, wait_s=None, env={WARM_GATE_ENV: str(gate)}
    )
    try:
        assert not head.executors  # returned before the executor could register: its warm-up waits on the gate
        x = torch.arange(16.0).reshape(1, 16)
        call = asyncio.ensure_future(rt.call("cc_test_linear", tiny_ref(3), {"x": x}, {"scale": 2.0}))
        await asyncio.sleep(1.0)
        assert not call.done() and not head.executors
        assert head.stats()["tenants"]["default"]["queued"] == 1
        gate.touch()
        out = await asyncio.wait_for(call, 120)
        assert len(head.executors) == 1
        assert torch.equal(out["y"], LocalRuntime().run("cc_test_linear", tiny_ref(3), {"x": x}, {"scale": 2.0})["y"])
    finally:
        head.stop()
