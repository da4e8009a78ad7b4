"""docs/nodes.md is generated from the code (comfy_bridge/nodes_doc.py: the offered classes counted
against ComfyUI's 364, a reason for every module with classes not offered) and is current."""

from __future__ import annotations

import json
from pathlib import Path

from comfy_bridge.nodes_doc import offered_classes, reference, render
from comfy_bridge.nodes_doc_today import TODAY_CLASSES, today_local_classes

DOC = Path(__file__).resolve().parents[2] / "docs" / "nodes.md"


def test_the_nodes_document_is_current():
    assert DOC.read_text() == render(reference(), offered_classes()), (
        "docs/nodes.md is stale: run `python -m comfy_bridge.nodes_doc > docs/nodes.md`"
    )


def test_the_count_of_todays_local_classes_is_stated_from_the_class_list():
    listed = json.loads(TODAY_CLASSES.read_text())
    local, api = set(listed["local"]), set(listed["api"])
    assert not local & api and len(local) > 600 and {"KSampler", "ManualSigmas", "DualModelGuider"} <= local
    assert {"KlingAvatarNode", "OpenAIGPTImageNodeV2", "Wan2ImageToVideoApi"} <= api and "Note" not in local
    have = len(offered_classes() & set(today_local_classes()))
    assert f"**{have} of today's {len(local)} local core classes offered**" in DOC.read_text()
