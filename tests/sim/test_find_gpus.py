"""Capacity planning: `simulate --find-gpus` finds the fewest GPUs that meet a target SLO attainment."""

from __future__ import annotations

import json

import pytest

from cluster.sim.experiments import fewest_gpus
from comfy_bridge.cli.simulate import main as simulate_main


@pytest.mark.parametrize("needed", [1, 2, 7, 8, 9, 100])
def test_search_returns_the_first_count_that_meets_the_target(needed):
    gpus, tried = fewest_gpus(lambda n: 1.0 if n >= needed else 0.5, target=0.9)
    assert gpus == needed
    assert len(tried) <= 2 * max(1, needed).bit_length() + 1


def test_search_gives_up_past_the_limit_and_rejects_a_bad_target():
    gpus, tried = fewest_gpus(lambda n: 0.0, max_gpus=16)
    assert gpus is None and max(tried) == 16
    with pytest.raises(ValueError, match="target attainment"):
        fewest_gpus(lambda n: 1.0, target=1.5)


def test_cli_reports_the_fewest_gpus_for_a_generated_trace(capsys):
    assert simulate_main(["--duration", "40", "--rate", "0.5", "--warmup", "5", "--find-gpus"]) == 0
    out = json.loads(capsys.readouterr().out)
    tried = {int(n): a for n, a in out["tried"].items()}
    assert tried[out["gpus"]] >= 0.9
    assert out["gpus"] - 1 in tried and tried[out["gpus"] - 1] < 0.9
