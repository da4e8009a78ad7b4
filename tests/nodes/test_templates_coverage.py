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
    script = _script()
    fresh = json.dumps(script.compute(), indent=1) + "\n"
    assert script.RESULT.read_text() == fresh, "stale: run python scripts/templates_coverage.py and commit the result"


def test_a_templates_classes_include_its_subgraphs_and_leave_out_frontend_types_and_subgraph_ids():
    workflow = {
        "nodes": [{"type": "KSampler"}, {"type": "Note"}, {"type": "sg-1"}, {"type": "Reroute"}],
        "definitions": {"subgraphs": [{"id": "sg-1", "nodes": [{"type": "VAEDecode"}, {"type": "PrimitiveNode"}]}]},
    }
    assert _script().template_classes(workflow) == {"KSampler", "VAEDecode"}


def test_paid_templates_are_left_out_and_usage_weighs_the_share(tmp_path):
    index = [
        {
            "templates": [
                {"name": "a", "usage": 30},
                {"name": "b", "usage": 10, "openSource": True},
                {"name": "paid", "usage": 1000, "openSource": False},
            ]
        }
    ]
    (tmp_path / "index.json").write_text(json.dumps(index))
    (tmp_path / "a.json").write_text(json.dumps({"nodes": [{"type": "KSampler"}, {"type": "NewNode"}]}))
    (tmp_path / "b.json").write_text(json.dumps({"nodes": [{"type": "KSampler"}]}))
    result = _script().coverage(tmp_path, offered={"KSampler"})
    assert (result["local_templates"], result["complete_templates"]) == (2, 1)
    assert result["complete_usage_share"] == 0.25
    assert result["missing_classes"] == [{"class": "NewNode", "templates": 1, "usage": 30}]
