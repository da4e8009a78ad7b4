"""`comfy-cluster bench cfg-split` end to end on the demo checkpoint: both servers take their four turns, the
result file holds every turn and the figure, and the split's images equal the one executor's."""

from __future__ import annotations

import json

from comfy_bridge.bench import cfg_split


def test_a_small_run_writes_its_turns_and_figure(tmp_path):
    out = tmp_path / "cfg_split.json"
    argv = ["--checkpoint", "demo", "--size", "64", "--steps", "2", "--prompts", "1", "--out", str(out)]
    assert cfg_split.main(argv) == 0
    result = json.loads(out.read_text())
    assert [t["server"] for t in result["rounds"]] == list(cfg_split.ORDER)
    fig = result["figure"]
    assert set(fig["median_latency_s"]) == {"one executor", "cfg split"} and fig["ratio"] > 0
    assert fig["images_identical"] is True
