"""The dispatch benchmark runs end to end, with and without a tensor through the data plane (its
figures are for the README, never asserted against a time)."""

from __future__ import annotations

import pytest

from cluster.bench.dispatch import bench_dispatch, bench_scheduler


@pytest.mark.parametrize("tensor", [False, True])
def test_dispatch_benchmark_reports_latency_and_overhead(tensor):
    r = bench_dispatch(30, "tcp", tensor)
    assert r["calls"] == 30
    assert 0 < r["overhead_median_ms"] <= r["latency_median_ms"] <= r["latency_p99_ms"]


def test_scheduler_benchmark_counts_every_decision():
    assert bench_scheduler("vtime", invocations=200, tenants=20, rounds=1) > 0
