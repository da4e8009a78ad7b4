"""docs/nodes.md is generated from the code (comfy_bridge/nodes_doc.py: the offered classes counted
against ComfyUI's 364, a reason for every module with classes not offered) and is current."""
from __future__ import annotations

from pathlib import Path

from comfy_bridge.nodes_doc import offered_classes, reference, render

DOC = Path(__file__).resolve().parents[2] / "docs" / "nodes.md"


def test_the_nodes_document_is_current():
    assert DOC.read_text() == render(reference(), offered_classes()), \
        "docs/nodes.md is stale: run `python -m comfy_bridge.nodes_doc > docs/nodes.md`"

