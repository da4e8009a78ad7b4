"""The template-workflow scripts' substitution (scripts/workflow_files.py `substituted`): a value set at its widget
index on every node of the type, one past the saved values appended (a widget the saved template predates), any
further index refused by node and index rather than written to the wrong widget."""

from __future__ import annotations

import pytest

from scripts.workflow_files import substituted


def _ui() -> dict:
    return {
        "nodes": [
            {"id": 3, "type": "KSampler", "widgets_values": [1, "randomize", 20]},
            {"id": 4, "type": "UNETLoader", "widgets_values": ["big.safetensors", "fp8_e4m3fn"]},
            {"id": 5, "type": "UNETLoader", "widgets_values": ["other.safetensors", "default"], "mode": 4},
        ]
    }


def test_values_are_set_on_every_node_of_the_type() -> None:
    ui = substituted(_ui(), {"UNETLoader": [(0, "tiny.safetensors")], "KSampler": [(0, 42), (1, "fixed")]})
    assert [n["widgets_values"] for n in ui["nodes"]] == [
        [42, "fixed", 20],
        ["tiny.safetensors", "fp8_e4m3fn"],
        ["tiny.safetensors", "default"],
    ]


def test_an_index_one_past_the_saved_values_appends() -> None:
    ui = substituted(_ui(), {"KSampler": [(3, "simple")]})
    assert ui["nodes"][0]["widgets_values"] == [1, "randomize", 20, "simple"]


def test_an_index_further_on_is_refused_by_name() -> None:
    with pytest.raises(IndexError, match="KSampler node 3: widget index 5, but it saves 3 values"):
        substituted(_ui(), {"KSampler": [(5, "simple")]})
