"""Executors started to serve warm their ModelFns up (imports, first-call set-up) before they register,
so the first prompt of a fresh cluster finds them ready; the head records what each warmed. They start
with the cyclic garbage collector off and run with it on, the start-up's objects frozen out of its reach."""

from __future__ import annotations

import pytest

from cluster.executor.local_cluster import start_local_cluster

FNS = "tests.cluster.cluster_fns"


@pytest.mark.parametrize("warm_up", [True, False])
async def test_executors_report_their_modelfns_warmed_before_the_first_invocation(warm_up):
    head, rt = start_local_cluster(1, threads_per_executor=1, preload=[FNS], warm_up=warm_up)
    try:
        (ex,) = head.executors.values()
        # known at registration, before anything was dispatched
        assert ex.completed == 0
        assert ("cc_test_warm_probe" in ex.warmed) is warm_up
        assert (ex.warm_s > 0) is warm_up
        out = await rt.call("cc_test_warm_probe", None, {}, {})
        assert out["warmed"].item() == float(warm_up)
    finally:
        head.stop()


async def test_executors_run_with_the_collector_on_and_their_start_up_frozen():
    head, rt = start_local_cluster(1, threads_per_executor=1, preload=[FNS], warm_up=True)
    try:
        out = await rt.call("cc_test_collector_probe", None, {}, {})
        enabled, frozen = out["state"].tolist()
        assert enabled == 1.0
        assert frozen > 100_000  # torch and the providers: the collector started after them
    finally:
        head.stop()
