"""The simulator: determinism, trace generation and replay, baseline ordering, scale, the report."""

from __future__ import annotations

import numpy as np
import pytest

from cluster.sim.caches import LayerLRU
from cluster.sim.experiments import crossing
from cluster.sim.fairness import TENANTS, FairnessCase, bound, run_case, service_gap
from cluster.sim.gpu_profiles import GIB, ModelProfile
from cluster.sim.simulator import SimConfig, simulate
from cluster.sim.traces import TraceSpec, generate, iat_cov, read_csv, write_csv
from cluster.sim.workflows import catalogue

WORKFLOWS, PROFILES = catalogue("s1")
NAMES = [w.name for w in WORKFLOWS]


def _run(system: str, trace, gpus: int = 8, **kw):
    policy = "vtime" if system == "ours" else "fifo"
    return simulate(SimConfig(gpus=gpus, system=system, policy=policy, **kw), trace, WORKFLOWS, PROFILES)


def test_same_seed_gives_identical_runs_and_another_seed_differs():
    trace = generate(TraceSpec(duration_s=20, rate=3, seed=7), NAMES)
    a, b = _run("ours", trace), _run("ours", trace)
    assert [r.finish for r in a.requests] == [r.finish for r in b.requests]
    assert generate(TraceSpec(duration_s=20, rate=3, seed=7), NAMES) == trace
    assert generate(TraceSpec(duration_s=20, rate=3, seed=8), NAMES) != trace


@pytest.mark.parametrize("cov", [0.5, 1.0, 3.0])
def test_generator_inter_arrival_cov_matches_the_gamma_parameter(cov):
    trace = generate(TraceSpec(duration_s=4000, rate=5, cov=cov, diurnal_amplitude=0.0, seed=1), NAMES)
    assert len(trace) == pytest.approx(20000, rel=0.1 * max(1, cov))
    assert iat_cov(trace) == pytest.approx(cov, rel=0.1)


def test_generator_follows_the_diurnal_rate_and_skews_popularity():
    trace = generate(TraceSpec(duration_s=1000, rate=5, diurnal_amplitude=0.8, seed=2), NAMES)
    t = np.array([r.time for r in trace])
    trough, peak = np.sum(t < 100), np.sum((t > 450) & (t < 550))
    assert peak > 3 * trough
    counts = sorted((sum(r.tenant == x for r in trace) for x in {r.tenant for r in trace}), reverse=True)
    assert counts[0] > 2 * counts[-1]


def test_trace_csv_round_trip(tmp_path):
    trace = generate(TraceSpec(duration_s=30, rate=2, seed=3), NAMES)
    path = tmp_path / "trace.csv"
    write_csv(trace, path)
    assert read_csv(path, known=NAMES) == trace
    path.write_text("1.5,alice,flux1-schnell\n0.5,bob,sdxl\n")
    assert [(r.time, r.tenant) for r in read_csv(path)] == [(0.5, "bob"), (1.5, "alice")]
    path.write_text("0.5,bob,nope\n")
    with pytest.raises(ValueError, match="unknown workflow"):
        read_csv(path, known=NAMES)


def test_under_load_decomposition_and_model_cache_beat_nocache():
    trace = generate(TraceSpec(duration_s=40, rate=1.5, seed=4), NAMES)  # 8 GPUs, loaded but not swamped
    res = {s: _run(s, trace, warmup_s=8).attainment for s in ("ours", "mcache", "nocache")}
    assert res["ours"] > res["nocache"] + 0.2
    assert res["mcache"] > res["nocache"] + 0.1
    assert res["ours"] >= res["mcache"]


def test_layer_cache_evicts_lru_model_from_its_last_layers():
    p = {k: ModelProfile(k, 1.0, 1.0, 1.0, 0.1, layers=4) for k in "abc"}
    cache = LayerLRU(int(2.5 * GIB), p)
    assert cache.acquire("a") == 0 and cache.acquire("b") == 0
    assert cache.acquire("c") == 0  # needs 1 GiB, 0.5 free: two layers of a go
    assert cache.layers("a") == 2 and cache.layers("b") == 4
    assert cache.acquire("a") == 2  # its first layers stayed
    assert cache.used <= cache.capacity


def test_vtime_bounds_the_service_gap_while_fifo_grows():
    times = np.linspace(0, 40, 41)
    fifo = service_gap(run_case(FairnessCase("fifo", duration_s=40)), times)
    assert abs(fifo[-1]) > 4 * abs(fifo[10]) > 0 and abs(fifo[-1]) > 50
    for delta in (0.0, 5.0):
        # the paper's W_u(0, t) is the tenant's vTime (both start at 0): their gap is the bound's quantity
        r = run_case(FairnessCase("vtime", delta, duration_s=40))
        _, vtime_gap = r.vtime_gap(TENANTS)
        assert np.abs(vtime_gap).max() <= bound(r, delta)
        assert np.abs(service_gap(r, times)).max() < 2 * bound(r, delta)  # GPU time of finished work


def test_256_gpus_with_600_requests_in_flight_completes_them():
    trace = generate(TraceSpec(duration_s=6, rate=160, diurnal_amplitude=0.0, seed=5), NAMES)
    r = _run("ours", trace, gpus=256)
    assert r.max_inflight >= 600
    assert r.completed == len(trace)
    assert 0 < r.overhead < 1


def test_crossing_finds_the_90_percent_points():
    assert crossing([1, 2, 3], [1.0, 0.95, 0.85]) == pytest.approx(2.5)
    assert crossing([1, 2, 3], [0.8, 0.7, 0.6]) is None
    assert crossing([4, 8, 16], [0.5, 0.9, 0.99], rising=True) == 8


def test_first_crossing_stops_at_the_first_dip_the_last_rule_looks_past_it():
    # Comfy Cluster's 2-seed curve on the paper trace (issue 40): it dips to 84 % at 4 req/s, recovers to 98 %
    rates = [0.25, 0.5, 1, 1.5, 2, 3, 4, 5, 6, 8]
    ours = [0.99, 0.99, 0.97, 0.98, 0.96, 0.99, 0.84, 0.98, 0.94, 0.74]
    assert crossing(rates, ours) == pytest.approx(3.6)
    assert crossing(rates, ours, rule="last") == pytest.approx(6.0 + 2 * 0.04 / 0.20)
    assert crossing([1, 2], [0.8, 0.95]) is None  # the lowest rate already misses
    assert crossing([1, 2], [0.8, 0.95], rule="last") == 2
    assert crossing([1, 2], [0.95, 0.91]) == 2  # never drops: the highest swept rate
    with pytest.raises(ValueError, match="rule"):
        crossing([1], [1.0], rule="median")


def test_report_writes_markdown_and_plots(tmp_path):
    pytest.importorskip("matplotlib")
    from cluster.sim.report import main

    out = tmp_path / "r"
    assert (
        main(
            [
                "--out",
                str(out),
                "--duration",
                "15",
                "--seeds",
                "1",
                "--gpus",
                "8",
                "--rate",
                "2",
                "--gpu-sweep-rate",
                "1",
                "--scale-gpus",
                "16",
                "--scale-rate",
                "8",
                "--scale-duration",
                "4",
                "--startup-duration",
                "20",
                "--workers",
                "1",
            ]
        )
        == 0
    )
    text = (out / "report.md").read_text()
    assert "Headline" in text and "Fairness" in text and "Capacity planning" in text
    assert "baselines as function instances with start-up S" in text
    for name in (
        "startup_sweep",
        "slo_vs_rate",
        "slo_vs_slo_scale",
        "slo_vs_gpus",
        "slo_vs_cov",
        "memory_utilisation",
        "fairness",
        "loading_breakdown",
        "latency_breakdown",
    ):
        png = out / f"{name}.png"
        assert png.read_bytes()[:4] == b"\x89PNG", name
        assert f"{name}.png" in text


def test_summary_breaks_attainment_down_by_workflow_and_tenant():
    trace = generate(TraceSpec(duration_s=30, rate=2, seed=6), NAMES)
    r = _run("ours", trace, gpus=6)
    s = r.summary()
    for by in ("by_workflow", "by_tenant"):
        groups = s[by]
        assert sum(g["requests"] for g in groups.values()) == len(r.measured)
        met = sum(g["slo_attainment"] * g["requests"] for g in groups.values())
        assert met == pytest.approx(r.attainment * len(r.measured), abs=0.01)  # rounded to 4 places
    assert set(s["by_workflow"]) == {q.workflow for q in r.measured}
    assert min(g["slo_attainment"] for g in s["by_workflow"].values()) < 1.0  # 6 GPUs: someone misses


def test_report_only_startup_writes_the_function_instance_section_at_the_default_s(tmp_path):
    pytest.importorskip("matplotlib")
    from cluster.sim.report import main
    from cluster.sim.startup_sweep import DEFAULT_STARTUP_S

    out = tmp_path / "r"
    assert (
        main(
            [
                "--only",
                "startup",
                "--out",
                str(out),
                "--seeds",
                "1",
                "--gpus",
                "8",
                "--startup-duration",
                "20",
                "--startups",
                "0",
                str(DEFAULT_STARTUP_S),
                "--workers",
                "1",
            ]
        )
        == 0
    )
    text = (out / "startup_sweep.md").read_text()
    assert f"At the default start-up S = {DEFAULT_STARTUP_S:g} s" in text
    assert f"| **{DEFAULT_STARTUP_S:g} (default)** |" in text and "| 0 |" in text
    assert "bench startup" in text and "twice MCache's rate" in text
    assert (out / "startup_sweep.png").read_bytes()[:4] == b"\x89PNG"
    assert not (out / "report.md").exists()
