"""The monolithic baselines as the paper runs them (serverless function instances with a start-up cost,
scaled in after a keep-alive, a WCache instance ending with its cached workflow), Comfy Cluster's
preloading of first layers into idle memory, and the paper's trace shape."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cluster.sim.caches import LayerLRU
from cluster.sim.gpu_profiles import REFERENCE, ModelProfile
from cluster.sim.simulator import SimConfig, simulate
from cluster.sim.traces import TraceRequest, TraceSpec, generate, tenant_covs
from cluster.sim.workflows import catalogue

WORKFLOWS, PROFILES = catalogue("s1")
NAMES = [w.name for w in WORKFLOWS]
ONE = WORKFLOWS[0].name


def _one_gpu(system: str, trace, **kw):
    return simulate(SimConfig(gpus=1, system=system, policy="fifo", slo_s=1e9, **kw), trace, WORKFLOWS, PROFILES)


def _latencies(result) -> list[float]:
    return [r.finish - r.arrival for r in result.requests]


@pytest.mark.parametrize("system", ["nocache", "mcache", "wcache"])
def test_a_function_instance_pays_its_startup_once_then_serves_warm(system):
    trace = [TraceRequest(0.0, "t", ONE), TraceRequest(200.0, "t", ONE)]
    pool = _one_gpu(system, trace)
    functions = _one_gpu(system, trace, startup_s=10.0, keepalive_s=1000.0)
    assert functions.loads["instance_starts"] == 1
    assert _latencies(functions)[0] == pytest.approx(_latencies(pool)[0] + 10.0)
    assert _latencies(functions)[1] == pytest.approx(_latencies(pool)[1])
    assert "instance_starts" not in pool.loads  # startup_s 0: the generous shared pool, as before


def test_an_idle_instance_is_scaled_in_after_its_keepalive():
    trace = [TraceRequest(0.0, "t", ONE), TraceRequest(200.0, "t", ONE)]
    kept = _one_gpu("mcache", trace, startup_s=10.0, keepalive_s=1000.0)
    scaled_in = _one_gpu("mcache", trace, startup_s=10.0, keepalive_s=30.0)
    assert scaled_in.loads["instance_starts"] == 2
    # MCache's models stay cached when the instance goes: the second request pays the start-up only
    assert _latencies(scaled_in)[1] == pytest.approx(_latencies(kept)[1] + 10.0)


def test_a_wcache_instance_ends_when_its_workflow_is_evicted():
    a, b = WORKFLOWS[0].name, WORKFLOWS[1].name
    trace = [TraceRequest(0.0, "t", a), TraceRequest(100.0, "t", b), TraceRequest(200.0, "t", a)]
    roomy = _one_gpu("wcache", trace, startup_s=10.0, keepalive_s=1000.0, gpu=replace(REFERENCE, memory_gib=1000))
    # 40 GiB holds sd3.5-large (29.6 GiB) or z-image (19.1 GiB), not both
    tight = _one_gpu("wcache", trace, startup_s=10.0, keepalive_s=1000.0, gpu=replace(REFERENCE, memory_gib=40))
    assert roomy.loads["instance_starts"] == 2
    assert tight.loads["instance_starts"] == 3


def test_instances_take_no_warm_wait_a_platform_starts_another_one():
    trace = [TraceRequest(0.0, "t", ONE), TraceRequest(0.1, "t", ONE)]
    two = simulate(
        SimConfig(gpus=2, system="mcache", policy="fifo", slo_s=1e9, startup_s=10.0), trace, WORKFLOWS, PROFILES
    )
    assert two.loads["instance_starts"] == 2


def test_preloading_fills_idle_memory_with_first_layers_and_never_evicts():
    p = {
        "m": ModelProfile("m", 1.0, 1.0, gib=8, exec_s=0.1, layers=8),
        "n": ModelProfile("n", 1.0, 1.0, gib=8, exec_s=0.1, layers=8),
    }
    cache = LayerLRU(capacity=10 * 2**30, profiles=p)
    cache.acquire("n")  # 8 GiB in use, 2 GiB free
    assert cache.preload("m", 4) == 2 * 2**30  # two 1 GiB layers fit, not four
    assert cache.layers("m") == 2 and cache.layers("n") == 8
    assert list(cache.resident) == ["m", "n"]  # preloaded layers are the first to go
    assert cache.preload("m", 4) == 0


def test_preloading_hides_the_first_loads_of_comfy_cluster():
    trace = [TraceRequest(float(i), "t", w) for i, w in enumerate(NAMES)]
    cold = simulate(SimConfig(gpus=4, system="ours", slo_s=1e9), trace, WORKFLOWS, PROFILES)
    warm = simulate(SimConfig(gpus=4, system="ours", slo_s=1e9, preload=True), trace, WORKFLOWS, PROFILES)
    assert sum(r.load_s for r in warm.requests) < 0.5 * sum(r.load_s for r in cold.requests)
    assert warm.memory_utilisation > cold.memory_utilisation


def test_the_paper_trace_gives_each_workflow_its_own_bursty_tenant():
    trace = generate(TraceSpec(duration_s=3000, rate=2.0, kind="paper", seed=4), NAMES)
    assert {r.tenant for r in trace} == {f"tenant-{w}" for w in NAMES}
    assert all(r.tenant == f"tenant-{r.workflow}" for r in trace)
    covs = tenant_covs(trace)
    assert sum(c > 1 for c in covs.values()) >= 3  # most tenants burstier than Poisson
    assert len(trace) == pytest.approx(6000, rel=0.25)
    with pytest.raises(ValueError, match="unknown trace kind"):
        generate(TraceSpec(kind="nope"), NAMES)


def test_memory_use_is_ordered_as_in_the_papers_figure_10e():
    """NoCache < WCache < MCache < Comfy Cluster: a WCache instance scaled in takes its workflow's weights with
    it, MCache's models outlive their instances, and Comfy Cluster fills idle memory with first layers."""
    from cluster.sim.experiments import Point, run_point

    base = Point(rate=1.5, duration_s=120, warmup_s=0, trace_kind="paper", startup_s=10.0)
    memory = [
        run_point(base.with_(system=s, policy="fifo")).memory_utilisation for s in ("nocache", "wcache", "mcache")
    ]
    memory.append(run_point(base.with_(system="ours", policy="vtime", preload=True)).memory_utilisation)
    assert memory == sorted(memory) and len(set(memory)) == 4
