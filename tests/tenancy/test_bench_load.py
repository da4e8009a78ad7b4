"""`comfy-cluster bench tenants-load` end to end on a small load: every prompt of every tenant runs,
each tenant's POST /prompt (its first one with a key the server has not checked yet), /queue and
/history are timed, and the report's verdict follows its own figures. No timing is asserted here:
the figures depend on the machine; the bench itself prints PASS or FAIL against its targets."""

from __future__ import annotations

from comfy_bridge.bench.tenants_load import TARGETS_P99_MS, percentiles, report, run, verdict
from comfy_bridge.cli import main


def test_percentiles_use_nearest_rank():
    samples = [i / 1000 for i in range(1, 101)]  # 1..100 ms
    p = percentiles(samples)
    assert (p["n"], p["p50"], p["p95"], p["p99"], p["max"]) == (100, 50.0, 95.0, 99.0, 100.0)
    assert percentiles([0.002])["p99"] == 2.0


def _result(submit_ms: float, queue_ms: float, history_ms: float, **extra) -> dict:
    timings = {
        "submit": [submit_ms / 1000] * 100,
        "queue": [queue_ms / 1000] * 100,
        "history": [history_ms / 1000] * 100,
    }
    return {
        "timings": timings,
        "errors": [],
        "submitted_s": 1.0,
        "work_s": 1.0,
        "tenants": 2,
        "tenants_done": 2,
        "prompts_done": 200,
        "finished_before": 0,
        "polled_for": None,
        **extra,
    }


def test_the_verdict_holds_each_kind_to_its_target():
    assert TARGETS_P99_MS == {"submit": 250.0, "queue": 50.0, "history": 50.0}
    assert verdict(_result(249, 49, 49)) == []
    assert "PASS" in report(_result(249, 49, 49), 2, 100, 8).splitlines()[-1]
    for slow, kind in (((250, 1, 1), "submit"), ((1, 50, 1), "queue"), ((1, 1, 50), "history")):
        missed = verdict(_result(*slow))
        assert len(missed) == 1 and missed[0].startswith(kind), missed
        assert report(_result(*slow), 2, 100, 8).splitlines()[-1].startswith("FAIL: " + kind)
    assert verdict(_result(1, 1, 1, errors=["POST /prompt: 500"]))
    assert verdict(_result(1, 1, 1, tenants_done=1))
    empty = _result(1, 1, 1)
    empty["timings"]["history"] = []
    assert verdict(empty) == ["no history request timed"]


def test_small_load_runs_every_prompt_with_cold_keys_and_reports_latencies():
    result = run(tenants=3, prompts=4, size=8, poll_s=0.02, timeout_s=120)
    assert result["errors"] == []
    assert (result["tenants"], result["tenants_done"]) == (3, 3)
    # every POST /prompt is timed, the first of each tenant included: no request warms the keys first
    assert len(result["timings"]["submit"]) == 12
    assert len(result["timings"]["queue"]) >= 3 and len(result["timings"]["history"]) >= 3
    text = report(result, 3, 4, 8)
    assert "3 tenants x 4 prompts = 12 queued" in text
    assert result["prompts_done"] + result["finished_before"] == 12
    assert f"{result['prompts_done']} of 12 prompts finished during the polling" in text
    for label in ("POST /prompt", "GET /queue", "GET /history"):
        assert label in text
    assert text.splitlines()[-1] == ("PASS" if not verdict(result) else "FAIL: " + "; ".join(verdict(result)))


def test_registered_as_a_bench_command_whose_status_is_its_verdict(capsys):
    status = main(["bench", "tenants-load", "--tenants", "2", "--prompts", "2", "--size", "8", "--poll", "0.02"])
    out = capsys.readouterr().out
    assert "2 tenants x 2 prompts = 4 queued" in out and "target p99 < 250 ms" in out and "target p99 < 50 ms" in out
    last = out.strip().splitlines()[-1]
    assert last == "PASS" or last.startswith("FAIL: ")
    assert status == (0 if last == "PASS" else 1)


def test_polling_for_a_fixed_time_counts_the_prompts_finished_meanwhile():
    result = run(tenants=2, prompts=200, size=8, poll_s=0, timeout_s=120, duration_s=1.0)
    assert result["errors"] == [] and result["polled_for"] == 1.0
    assert 0 <= result["prompts_done"] and result["prompts_done"] + result["finished_before"] <= 400
    assert len(result["timings"]["queue"]) >= 2
    text = report(result, 2, 200, 8)
    assert f"{result['prompts_done']} of 400 prompts finished during the" in text and "s of polling" in text
