"""`bench startup` measures, in fresh processes, each part of a monolithic Diffusers instance's start-up."""
from __future__ import annotations

import json

from comfy_bridge.bench.startup import PHASES, main


def test_bench_startup_times_every_phase_of_a_fresh_process(tmp_path, capsys):
    out = tmp_path / "startup.json"
    assert main(["--rounds", "1", "--pipelines", "flux1-dev", "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    runs = d["runs"]["flux1-dev"]
    assert len(runs) == 1
    for run in runs:
        assert set(run) == {*PHASES, "total", "cpu"} and run["cpu"] > 0
        assert all(run[p] > 0 for p in PHASES)
        assert abs(sum(run[p] for p in PHASES) - run["total"]) < 1e-6
    assert d["startup_s"] == d["median"]["flux1-dev"]["total"]
    assert len(d["loadavg_before"]) == 3 and len(d["loadavg_after"]) == 3
    text = capsys.readouterr().out
    assert all(p in text for p in PHASES) and "load average" in text and "lower bound" in text
