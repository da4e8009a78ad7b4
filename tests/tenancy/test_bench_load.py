"""`comfy-cluster bench tenants-load` end to end on a small load: every prompt of every tenant runs,
each tenant's /queue and /history are timed while the worker executes, and the report prints them."""
from __future__ import annotations

from comfy_bridge.cli import main
from comfy_bridge.tenancy.bench_load import percentiles, report, run


def test_percentiles_use_nearest_rank():
    samples = [i / 1000 for i in range(1, 101)]   # 1..100 ms
    p = percentiles(samples)
    assert (p["n"], p["p50"], p["p95"], p["p99"], p["max"]) == (100, 50.0, 95.0, 99.0, 100.0)
    assert percentiles([0.002])["p99"] == 2.0


def test_small_load_runs_every_prompt_and_reports_latencies():
    result = run(tenants=3, prompts=4, size=8, poll_s=0.02, timeout_s=120)
    assert result["errors"] == []
    assert result["tenants_done"] == 3
    assert len(result["timings"]["submit"]) == 12
    assert len(result["timings"]["queue"]) >= 3 and len(result["timings"]["history"]) >= 3
    text = report(result, 3, 4, 8)
    assert "3 tenants x 4 prompts = 12 queued" in text and "GET /queue" in text and "GET /history" in text
    assert "p99" in text and ("PASS" in text or "FAIL" in text)


def test_registered_as_a_bench_command(capsys):
    assert main(["bench", "tenants-load", "--tenants", "2", "--prompts", "2", "--size", "8", "--poll", "0.02"]) == 0
    out = capsys.readouterr().out
    assert "2 tenants x 2 prompts = 4 queued" in out and "target p99 < 100 ms" in out
