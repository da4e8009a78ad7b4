"""Cascades are declared in the workspace's cascades/*.yaml and listed by cascade_stats()."""

from __future__ import annotations

import json

import pytest

from cluster.cascade.spec import CascadeSpec, load_cascades

YAML = """
light: {checkpoint: sd1-tiny.safetensors, steps: 2, cfg: 1.0}
heavy: {checkpoint: sdxl-tiny.safetensors, steps: 12}
discriminator: cascade-demo-discriminator.safetensors
slo_s: 3.5
policy:
  thresholds: {min: 0.0, max: 0.5, step: 0.1}
  batch_sizes: [4, 1, 2]
  max_executors: 6
"""


def test_yaml_files_load_with_defaults(tmp_path):
    (tmp_path / "cascades").mkdir()
    (tmp_path / "cascades" / "fast.yaml").write_text(YAML)
    (tmp_path / "cascades" / "fixed.yml").write_text(
        "name: pinned\nlight: a.safetensors\nheavy: b.safetensors\n"
        "discriminator: d.safetensors\npolicy: {threshold: 0.3}\n"
    )
    specs = load_cascades(tmp_path)
    assert sorted(specs) == ["fast", "pinned"]
    fast = specs["fast"]
    assert (fast.light.steps, fast.light.cfg, fast.heavy.steps, fast.heavy.sampler) == (2, 1.0, 12, "euler")
    assert fast.slo_s == 3.5 and fast.policy.adaptive and fast.policy.batch_sizes == (1, 2, 4)
    assert fast.policy.grid() == (0.0, 0.1, 0.2, 0.3, 0.4, 0.5) and fast.policy.max_executors == 6
    assert specs["pinned"].policy.grid() == (0.3,) and not specs["pinned"].policy.adaptive


@pytest.mark.parametrize(
    "text, message",
    [
        ("light: a\nheavy: b\n", "missing 'discriminator'"),
        ("light: {steps: 2}\nheavy: b\ndiscriminator: d\n", "light"),
        ("light: a\nheavy: b\ndiscriminator: d\nslo_s: 0\n", "slo_s"),
        ("light: a\nheavy: b\ndiscriminator: d\npolicy: {batch_sizes: [0]}\n", "batch_sizes"),
        ("light: {checkpoint: a, step: 3}\nheavy: b\ndiscriminator: d\n", "unknown keys"),
    ],
)
def test_bad_files_are_named_in_the_error(tmp_path, text, message):
    (tmp_path / "cascades").mkdir()
    (tmp_path / "cascades" / "bad.yaml").write_text(text)
    with pytest.raises(ValueError, match=message) as err:
        load_cascades(tmp_path)
    assert "bad.yaml" in str(err.value)


def test_cascade_stats_lists_workspace_cascades(tmp_path):
    from cluster.cascade import cascade_stats
    from cluster.cascade.controller import CascadeController, set_default_controller
    from nodes.workspace import Workspace, activate, active

    previous = active()
    try:
        ws = activate(Workspace(tmp_path).create())
        (ws.root / "cascades").mkdir()
        (ws.root / "cascades" / "fast.yaml").write_text(YAML)
        set_default_controller(CascadeController(budget=4))
        stats = json.loads(json.dumps(cascade_stats(ws.root)))  # JSON-ready
        assert stats["budget"] == 4
        fast = stats["cascades"]["fast"]
        assert fast["light"]["checkpoint"] == "sd1-tiny.safetensors" and fast["slo_s"] == 3.5
        assert fast["decision"] is None and fast["queries"] == 0
    finally:
        set_default_controller(None)
        activate(previous)


def test_spec_parse_rejects_non_mapping():
    with pytest.raises(ValueError, match="expected a mapping"):
        CascadeSpec.parse(["light"], "x")
