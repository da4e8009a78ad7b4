"""An executor on another machine runs a pack node from its own workspace's copy of the pack: found by the
pack's folder name when the head's path is not there, refused by name when it is missing or its Python
sources differ from the head's; it keeps its own workspace, where the head's host differs from its own."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cluster.dataplane.remote import host_id
from comfy_bridge.packs import pack_node
from comfy_bridge.packs.origin import PackOrigin
from nodes import workspace
from nodes.workspace import Workspace

PACK = Path(__file__).parent / "fixture_packs" / "v1_pack"


@pytest.fixture
def this_machine(tmp_path):
    before = workspace._active
    ws = workspace.activate(Workspace(tmp_path / "here").create())
    yield ws
    workspace._active = before


def _origin(tmp_path) -> PackOrigin:
    return PackOrigin("v1_pack", str(tmp_path / "head" / "custom_nodes" / "v1_pack"), "V1Invert")


def test_the_same_pack_is_found_by_name(this_machine, tmp_path):
    copy = this_machine.root / "custom_nodes" / "v1_pack"
    shutil.copytree(PACK, copy)
    assert pack_node._pack_here(_origin(tmp_path), pack_node.pack_source_digest(PACK)) == copy


def test_a_missing_or_different_pack_is_refused_by_name(this_machine, tmp_path):
    with pytest.raises(FileNotFoundError, match="node pack 'v1_pack' is not installed on this machine"):
        pack_node._pack_here(_origin(tmp_path), pack_node.pack_source_digest(PACK))
    copy = this_machine.root / "custom_nodes" / "v1_pack"
    shutil.copytree(PACK, copy)
    (copy / "nodes.py").write_text((copy / "nodes.py").read_text() + "\n# another version\n")
    with pytest.raises(ValueError, match="is not the head's: its Python sources differ"):
        pack_node._pack_here(_origin(tmp_path), pack_node.pack_source_digest(PACK))


def test_the_heads_path_is_used_where_it_exists(this_machine):
    origin = PackOrigin("v1_pack", str(PACK), "V1Invert")
    assert pack_node._pack_here(origin, "any digest: not checked on the head's own files") == PACK


def test_only_an_executor_on_the_heads_host_takes_the_heads_workspace(this_machine, tmp_path):
    heads = Workspace(tmp_path / "head").create().snapshot()
    pack_node._activate(heads, "another-host/0000")
    assert workspace.active() is this_machine
    pack_node._activate(heads, host_id())
    assert workspace.active().root == tmp_path / "head"
