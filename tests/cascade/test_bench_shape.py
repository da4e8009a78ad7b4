"""On a rising-then-falling load with DiffServe's profiles, the adaptive cascade (real controller,
simulated executors) keeps violations far below all-heavy while serving more queries with the heavy
model than all-light or a cascade provisioned statically for the peak."""
from __future__ import annotations

from cluster.cascade.bench import compare, modelled_fid


def test_adaptive_cascade_reproduces_diffserve_shape():
    sims = {s.policy: s.summary() for s in compare(seconds=150, low=2, peak=26, executors=16, seed=1)}
    light, heavy, static, adaptive = (sims[p] for p in ("light", "heavy", "static", "adaptive"))
    assert light["slo_violation"] < 0.01 and light["heavy_share"] == 0
    assert heavy["slo_violation"] > 0.3
    assert adaptive["slo_violation"] < heavy["slo_violation"] / 3
    assert adaptive["heavy_share"] > static["heavy_share"] + 0.1
    assert adaptive["fid"] < light["fid"]


def test_modelled_fid_interpolates_diffserve_table():
    assert modelled_fid(0.0) == 18.55 and modelled_fid(1.0) == 22.77
    assert modelled_fid(0.45) == (16.79 + 16.95) / 2
