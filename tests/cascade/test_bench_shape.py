"""On a rising-then-falling load with DiffServe's profiles, the adaptive cascade (real controller,
simulated executors) keeps violations as low as a cascade provisioned statically for the peak, in
every window of the ramp too, while serving more queries with the heavy model than it or all-light."""

from __future__ import annotations

from cluster.bench.cascade import compare, modelled_fid


def test_adaptive_cascade_reproduces_diffserve_shape():
    runs = {s.policy: s for s in compare(seconds=150, low=2, peak=26, executors=16, seed=1)}
    light, heavy, static, adaptive = (runs[p].summary() for p in ("light", "heavy", "static", "adaptive"))
    assert light["slo_violation"] < 0.01 and light["heavy_share"] == 0
    assert heavy["slo_violation"] > 0.3
    assert adaptive["slo_violation"] <= static["slo_violation"] + 0.01
    # Not only on average: no 10 s window, rising load included, goes over 5 % late or dropped.
    assert runs["adaptive"].series()["violation"].max() <= 0.05
    assert adaptive["heavy_share"] > static["heavy_share"] + 0.15
    assert adaptive["fid"] < min(light["fid"], static["fid"])


def test_modelled_fid_interpolates_diffserve_table():
    assert modelled_fid(0.0) == 18.55 and modelled_fid(1.0) == 22.77
    assert modelled_fid(0.45) == (16.79 + 16.95) / 2
