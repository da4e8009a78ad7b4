"""Every `comfy-cluster bench` writes its result file (cluster/bench/results.py, issue 40 item 1)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

from cluster.bench import results
from comfy_bridge.cli.bench import BENCHMARKS


def test_a_result_file_says_what_ran_where_and_every_round(tmp_path, monkeypatch):
    monkeypatch.setenv(results.ENV_DIR, str(tmp_path))
    run = results.begin("demo", ["--rounds", "3"])
    path = run.write([1.5, 1.25, 1.75], {"least_s": 1.25}, config={"rounds": 3})
    assert path == tmp_path / "demo.json"
    doc = json.loads(path.read_text())
    assert doc["command"] == "comfy-cluster bench demo --rounds 3"
    assert doc["rounds"] == [1.5, 1.25, 1.75] and doc["figure"] == {"least_s": 1.25}
    assert doc["config"] == {"rounds": 3}
    assert len(doc["commit"]) == 40 and isinstance(doc["dirty"], bool)  # this checkout's HEAD
    assert doc["date"].endswith("+00:00") and doc["machine"]["cpus"] == os.cpu_count()
    assert len(doc["load_average"]["start"]) == 3 and len(doc["load_average"]["end"]) == 3


def test_every_bench_writes_its_result_file():
    for name, module in BENCHMARKS.items():
        source = Path(importlib.util.find_spec(module).origin).read_text()
        assert "results.begin(" in source and ".write(" in source, f"`bench {name}` ({module}) writes no result file"
