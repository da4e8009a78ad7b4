"""scripts/templates_coverage.py: the committed result (docs/benchmarks/templates.json) is what the installed
templates package and the offered core classes give now, and the counting follows comfyui-today.md."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("templates_coverage", REPO / "scripts" / "templates_coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_result_equals_a_fresh_computation():
    """The node half is recomputed here; the render half (minutes of rendering, scripts/templates_render.py) is
    not, but its shares must be the ones its committed per-template flags give."""
    script = _script()
    committed = json.loads(script.RESULT.read_text())
    assert script.node_half(committed) == script.compute(), "stale: run python scripts/templates_coverage.py"
    assert committed["render_usage_share"] == script.render_shares(committed["templates"])
    for row in committed["templates"]:
        if row["missing"]:
            assert row["renders"] is False and row["render_error"].startswith("not offered: "), row["name"]
        else:
            assert row["renders"] in (True, False, None) and (row["renders"] is True) == (row["render_error"] is None)


def test_render_shares_weigh_usage_per_kind_and_count_unrendered_templates_as_not_running():
    script = _script()
    node_half = {
        "local_templates": 4,
        "templates": [
            {"name": "a", "kind": "image", "usage": 30, "missing": []},
            {"name": "b", "kind": "image", "usage": 10, "missing": []},
            {"name": "c", "kind": "video", "usage": 50, "missing": []},
            {"name": "d", "kind": "video", "usage": 50, "missing": ["NewNode"]},
        ],
    }
    renders = {"a": {"renders": True, "render_error": None}, "b": {"renders": False, "render_error": "boom"}}
    result = script.with_renders(node_half, renders)
    assert result["render_usage_share"] == {"all": 0.2143, "image": 0.75, "video": 0.0}
    flags = {r["name"]: (r["renders"], r["render_error"]) for r in result["templates"]}
    assert flags == {
        "a": (True, None),
        "b": (False, "boom"),
        "c": (None, script.NOT_RENDERED),
        "d": (False, "not offered: NewNode"),
    }
    assert script.node_half(result) == node_half
    assert not script.is_stale(result, node_half)
    result["templates"][0]["renders"] = False  # a flag edited without its share
    assert script.is_stale(result, node_half)


def test_a_templates_classes_include_its_subgraphs_and_leave_out_frontend_types_and_subgraph_ids():
    workflow = {
        "nodes": [{"type": "KSampler"}, {"type": "Note"}, {"type": "sg-1"}, {"type": "Reroute"}],
        "definitions": {"subgraphs": [{"id": "sg-1", "nodes": [{"type": "VAEDecode"}, {"type": "PrimitiveNode"}]}]},
    }
    assert _script().template_classes(workflow) == {"KSampler", "VAEDecode"}


def test_paid_templates_are_left_out_and_usage_weighs_the_share(tmp_path):
    index = [
        {
            "type": "image",
            "templates": [
                {"name": "a", "usage": 30},
                {"name": "b", "usage": 10, "openSource": True},
                {"name": "paid", "usage": 1000, "openSource": False},
            ],
        }
    ]
    (tmp_path / "index.json").write_text(json.dumps(index))
    (tmp_path / "a.json").write_text(json.dumps({"nodes": [{"type": "KSampler"}, {"type": "NewNode"}]}))
    (tmp_path / "b.json").write_text(json.dumps({"nodes": [{"type": "KSampler"}]}))
    result = _script().coverage(tmp_path, offered={"KSampler"})
    assert [r["kind"] for r in result["templates"]] == ["image", "image"]
    assert (result["local_templates"], result["complete_templates"]) == (2, 1)
    assert result["complete_usage_share"] == 0.25
    assert result["missing_classes"] == [{"class": "NewNode", "templates": 1, "usage": 30}]
