"""`bench startup` measures, in fresh processes, each part of a monolithic Diffusers instance's start-up."""

from __future__ import annotations

import json

from comfy_bridge.bench.startup import PHASES, main


def test_bench_startup_times_every_phase_of_a_fresh_process(tmp_path, capsys, monkeypatch):
    from cluster.bench import results

    monkeypatch.setenv(results.ENV_DIR, str(tmp_path))
    assert main(["--rounds", "1", "--pipelines", "flux1-dev"]) == 0
    d = json.loads(next(tmp_path.glob("*startup*.json")).read_text())
    runs = d["rounds"]["flux1-dev"]
    assert len(runs) == 1
    for run in runs:
        assert set(run) == {*PHASES, "total", "cpu"} and run["cpu"] > 0
        assert all(run[p] > 0 for p in PHASES)
        assert abs(sum(run[p] for p in PHASES) - run["total"]) < 1e-6
    assert d["figure"]["startup_s"] == d["figure"]["median"]["flux1-dev"]["total"]
    text = capsys.readouterr().out
    assert all(p in text for p in PHASES) and "load average" in text and "lower bound" in text
