"""Static vs adaptive cascades in the report: the sweep, its table and its plot."""

from __future__ import annotations

import pytest

from cluster.sim import cascades

pytest.importorskip("scipy")


@pytest.fixture(scope="module")
def sweep():
    return cascades.run(seconds=90.0, peaks=(8.0, 32.0), executors=16)


def test_every_policy_has_a_figure_per_peak_and_the_single_model_policies_answer_as_named(sweep):
    assert set(sweep["policies"]) == set(cascades.POLICIES)
    for row in sweep["policies"].values():
        assert len(row["violation"]) == len(row["heavy_share"]) == len(row["fid"]) == 2
        assert all(0.0 <= v <= 1.0 for v in row["violation"])
    assert sweep["policies"]["light"]["heavy_share"] == [0.0, 0.0]
    assert sweep["policies"]["heavy"]["heavy_share"] == [1.0, 1.0]


def test_at_a_high_peak_adapting_beats_a_cascade_provisioned_for_the_mean(sweep):
    pol = sweep["policies"]
    # one allocation solved for the mean demand cannot absorb the peak; the controller re-solves
    assert pol["static (mean)"]["violation"][-1] > pol["static (peak)"]["violation"][-1]
    assert pol["adaptive"]["violation"][-1] < pol["static (mean)"]["violation"][-1]


def test_adaptive_threshold_changes_over_the_trace(sweep):
    thresholds = {round(t, 3) for _, t in sweep["series"]["thresholds"]}
    assert len(thresholds) > 1


def test_markdown_table_and_plot(sweep, tmp_path):
    pytest.importorskip("matplotlib")
    text = "\n".join(cascades.markdown(sweep))
    for policy in cascades.POLICIES:
        assert f"| {policy} |" in text
    assert "![](cascades.png)" in text
    path = tmp_path / "cascades.png"
    cascades.plot(sweep, path)
    assert path.read_bytes()[:4] == b"\x89PNG"
    assert "Left out" in "\n".join(cascades.markdown(None))
