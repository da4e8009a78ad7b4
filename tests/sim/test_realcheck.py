"""The real-system check: a real `serve` replay beside the simulator's prediction of the same arrivals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cluster.sim import realcheck
from cluster.sim.realcheck import make_trace, simulate_measured_service, simulate_replay
from cluster.sim.realserver import RealRecord, SoloTiming, reseed
from cluster.sim.traces import TraceRequest


def test_one_prompt_admission_serves_requests_in_arrival_order_one_at_a_time():
    trace = [TraceRequest(0.0, "a", "x"), TraceRequest(0.1, "b", "y"), TraceRequest(0.2, "a", "x")]
    solo = {"x": SoloTiming(0.0, 1.0), "y": SoloTiming(0.0, 0.5)}
    one = simulate_replay(trace, solo, executors=2, max_running=1)
    # each starts when the previous one ends: 1.0, then +0.5, then +1.0 (plus the resident-load epsilon)
    assert [r[1] for r in one] == pytest.approx([1.0, 1.5, 2.5], abs=0.01)
    many = simulate_replay(trace, solo, executors=2, max_running=None)
    assert [r[1] for r in many] == pytest.approx([1.0, 0.6, 1.6], abs=0.01)


def test_admission_time_delays_entry_to_the_queue_and_counts_in_the_deadline():
    trace = [TraceRequest(0.0, "a", "x"), TraceRequest(0.5, "b", "x")]
    solo = {"x": SoloTiming(0.2, 1.0)}
    rows = simulate_replay(trace, solo, executors=2, max_running=1)
    # the first starts after its admission (0.2) and ends at 1.2; the second, admitted at 0.7, waits for it
    assert [r[1] for r in rows] == pytest.approx([1.2, 2.2], abs=0.01)
    assert [r[2] for r in rows] == pytest.approx([3.6, 4.1])  # arrival + 3 x (0.2 + 1.0)


def test_calibration_run_uses_each_requests_measured_service_and_solo_deadlines():
    records = [
        RealRecord(0.0, "a", "x", 2.0, 2.0, True),
        RealRecord(0.5, "b", "x", 2.6, 0.6, True),
        RealRecord(0.6, "a", "y", None, 0.0, False),
    ]
    rows = simulate_measured_service(
        records, {"x": SoloTiming(0.0, 1.0), "y": SoloTiming(0.0, 0.5)}, executors=2, max_running=1
    )
    assert [r[1] for r in rows] == pytest.approx([2.0, 2.6, 3.1], abs=0.01)  # the failed one runs its solo 0.5
    assert [r[2] for r in rows] == pytest.approx([3.0, 3.5, 2.1])  # deadlines: 3 x solo


def test_generated_trace_offers_the_requested_load_from_two_tenants():
    solo = {"x": 0.4, "y": 1.2}
    trace = make_trace(["x", "y"], solo, requests=400, load=0.5, cov=1.0, seed=3)
    assert {r.tenant for r in trace} == {"tenant0", "tenant1"}
    rate = len(trace) / trace[-1].time
    mean_service = np.mean([solo[r.workflow] for r in trace])
    assert rate * mean_service == pytest.approx(0.5, rel=0.1)


def test_reseed_changes_every_seed_and_nothing_else():
    prompt = {
        "3": {"class_type": "KSampler", "inputs": {"seed": 1, "steps": 20}},
        "4": {"class_type": "X", "inputs": {"noise_seed": 2, "text": "t"}},
    }
    out = reseed(prompt, np.random.default_rng(0))
    assert out["3"]["inputs"]["seed"] != 1 and out["4"]["inputs"]["noise_seed"] != 2
    assert out["3"]["inputs"]["steps"] == 20 and out["4"]["inputs"]["text"] == "t"
    assert prompt["3"]["inputs"]["seed"] == 1


def test_tiny_replay_against_a_real_server_gives_real_and_simulated_figures(tmp_path):
    args = realcheck.parser().parse_args(
        [
            "--workflows",
            "text_to_image",
            "sdxl",
            "--requests",
            "6",
            "--solo-repeats",
            "1",
            "--drain-timeout",
            "120",
            "--workspace",
            str(tmp_path / "ws"),
        ]
    )
    lines: list[str] = []
    d = realcheck.check(args, log=lines.append)
    assert set(d["solo_s"]) == {"text_to_image", "sdxl"} and all(s > 0 for s in d["solo_s"].values())
    assert d["failed"] == 0
    for key in ("real", "sim_prediction", "sim_concurrent", "sim_measured_service"):
        figs = d[key]
        assert figs["requests"] == d["requests"] >= 3
        assert figs["completed"] == d["requests"]
        assert 0.0 <= figs["attainment"] <= 1.0
        assert 0 < figs["p50_s"] <= figs["p95_s"]
    # no request can beat the fastest workflow alone, in the simulator as on the server
    assert d["sim_prediction"]["p50_s"] >= min(d["solo_s"].values()) - 1e-6
    assert set(d["solo_after"]) == set(d["solo_s"]) and math.isfinite(d["profile_drift"])
    assert math.isfinite(d["p50_ratio_prediction"]) and math.isfinite(d["p50_ratio_concurrent"])
    table = realcheck.format_table(d)
    assert "real" in table and "sim, 1 prompt(s)" in table and "sim, replay svc" in table and "p50 real / sim" in table
