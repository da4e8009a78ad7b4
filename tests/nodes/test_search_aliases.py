"""The names the web UI's node search also finds a core node by (its `search_aliases` in /object_info): ComfyUI
0.10.0's, recorded by scripts/record_comfyui_search_aliases.py into nodes/library/search_aliases.json."""

from __future__ import annotations

import json
from pathlib import Path

import nodes
from comfy_bridge.registry import build_registry

RECORDED = json.loads((Path(nodes.__file__).parent / "library" / "search_aliases.json").read_text())["classes"]
# Classes whose aliases changed after 0.10.0: as the newest Comfy-Org/ComfyUI source declares them (read 2026-12-05).
NEWER = {"LatentCutToBatch": ["slice to batch", "split latent", "tile latent", "chunk latent"]}


def test_every_offered_core_class_reports_comfyuis_search_aliases():
    registry = build_registry(None, load_custom_nodes=False)
    offered = sorted(set(RECORDED) & set(registry.builtin))
    assert len(offered) >= 120  # of the 135 classes 0.10.0 gives aliases (the others are not offered here)
    for name in offered:
        assert registry.node_info(name)["search_aliases"] == NEWER.get(name, RECORDED[name]), name
    assert registry.node_info("KSampler")["search_aliases"][-2:] == ["txt2img", "img2img"]
