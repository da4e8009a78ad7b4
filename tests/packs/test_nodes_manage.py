"""`comfy-cluster nodes install | list | disable | enable`: packs copied from a folder or cloned from a
(local) git repository into the workspace's custom_nodes, listed, and disabled / enabled by the
`.disabled` rename that the loader honours."""

from __future__ import annotations

import asyncio
import subprocess
import textwrap
from pathlib import Path

import pytest

from comfy_bridge.custom_nodes import load_custom_nodes
from comfy_bridge.packs.manage import PackError, install_pack, list_packs, set_enabled
from comfy_bridge.registry import NodeRegistry
from nodes.workspace import Workspace

PACK_INIT = textwrap.dedent("""
    class {cls}:
        @classmethod
        def INPUT_TYPES(cls):
            return {{"required": {{"image": ("IMAGE",)}}}}
        RETURN_TYPES = ("IMAGE",)
        FUNCTION = "run"
        CATEGORY = "managed"

        def run(self, image):
            return (image,)

    NODE_CLASS_MAPPINGS = {{"{cls}": {cls}}}
""")


def make_pack(folder: Path, cls: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(PACK_INIT.format(cls=cls))
    return folder


def git(*args: str, cwd: Path | None = None) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "HOME": str(cwd or Path.cwd()),
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def ws(tmp_path) -> Workspace:
    return Workspace(tmp_path / "ws").create()


def registered(ws: Workspace) -> set[str]:
    registry = NodeRegistry()
    asyncio.run(load_custom_nodes(registry, ws.folder_paths("custom_nodes")))
    return set(registry.classes)


def test_install_copies_a_local_folder_that_the_loader_then_loads(ws, tmp_path):
    source = make_pack(tmp_path / "src" / "copied_pack", "CopiedNode")
    (source / "requirements.txt").write_text("msgspec\n")  # already installed: pip installs nothing
    entry, installed = install_pack(ws, str(source))
    assert entry.path == ws.root / "custom_nodes" / "copied_pack"
    assert (entry.path / "__init__.py").read_text() == (source / "__init__.py").read_text()
    assert installed == []
    assert [(e.name, e.enabled) for e in list_packs(ws)] == [("copied_pack", True)]
    assert "CopiedNode" in registered(ws)


def test_install_copies_a_single_file_pack(ws, tmp_path):
    source = tmp_path / "single_node.py"
    source.write_text(PACK_INIT.format(cls="SingleFileNode"))
    entry, _ = install_pack(ws, str(source))
    assert entry.path == ws.root / "custom_nodes" / "single_node.py"
    assert "SingleFileNode" in registered(ws)


def test_install_clones_a_git_repository(ws, tmp_path):
    work = make_pack(tmp_path / "work" / "git_pack", "ClonedNode")
    git("init", "--quiet", cwd=work)
    git("add", ".", cwd=work)
    git("commit", "--quiet", "-m", "pack", cwd=work)
    bare = tmp_path / "remote" / "git_pack.git"
    git("clone", "--quiet", "--bare", str(work), str(bare))
    url = bare.as_uri()
    entry, _ = install_pack(ws, url)
    assert entry.name == "git_pack" and entry.origin == url
    assert git("rev-parse", "HEAD", cwd=entry.path) == git("rev-parse", "HEAD", cwd=work)
    assert "ClonedNode" in registered(ws)
    # A bare repository given as a plain path is cloned too, not copied.
    ws2 = Workspace(tmp_path / "ws2").create()
    entry2, _ = install_pack(ws2, str(bare))
    assert (entry2.path / "__init__.py").is_file() and entry2.origin == str(bare)


def test_a_failed_clone_leaves_nothing_behind(ws, tmp_path):
    with pytest.raises(PackError, match="git clone"):
        install_pack(ws, (tmp_path / "missing.git").as_uri())
    assert list((ws.root / "custom_nodes").iterdir()) == []


def test_install_refuses_a_name_already_there(ws, tmp_path):
    source = make_pack(tmp_path / "src" / "twice", "TwiceNode")
    install_pack(ws, str(source))
    set_enabled(ws, "twice", False)
    with pytest.raises(PackError, match="already"):
        install_pack(ws, str(source))


def test_disable_renames_as_the_manager_does_and_the_loader_skips_it(ws, tmp_path):
    install_pack(ws, str(make_pack(tmp_path / "src" / "toggled", "ToggledNode")))
    entry = set_enabled(ws, "toggled", False)
    assert entry.path.name == "toggled.disabled" and not (ws.root / "custom_nodes" / "toggled").exists()
    assert [(e.name, e.enabled) for e in list_packs(ws)] == [("toggled", False)]
    assert "ToggledNode" not in registered(ws)
    entry = set_enabled(ws, "toggled", True)
    assert entry.path.name == "toggled"
    assert "ToggledNode" in registered(ws)


def test_enable_and_disable_name_what_they_cannot_find(ws):
    with pytest.raises(PackError, match="no pack named 'ghost'"):
        set_enabled(ws, "ghost", False)
    with pytest.raises(PackError, match="built into Comfy Cluster"):
        set_enabled(ws, "comfy_cluster_nodes", False)


def test_cli_install_list_disable_enable(ws, tmp_path, capsys):
    from comfy_bridge.cli import main

    source = make_pack(tmp_path / "src" / "cli_pack", "CliNode")
    flags = ["--workspace", str(ws.root)]
    assert main(["nodes", "install", str(source), *flags]) == 0
    assert main(["nodes", "disable", "cli_pack", *flags]) == 0
    assert main(["nodes", "list", *flags]) == 0
    out = capsys.readouterr().out
    assert "installed cli_pack" in out
    assert "cli_pack\tdisabled\t" in out
    assert "comfy_cluster_nodes\tbuilt in\tCascadeKSampler" in out
    assert main(["nodes", "enable", "cli_pack", *flags]) == 0
    assert (ws.root / "custom_nodes" / "cli_pack").is_dir()
    assert main(["nodes", "enable", "nothing_here", *flags]) == 1


def test_the_cluster_nodes_pack_exports_the_registered_built_in_classes():
    from comfy_bridge.packs import cluster_pack
    from comfy_bridge.registry import build_registry

    registry = build_registry(None, load_custom_nodes=False)
    assert cluster_pack.node_names()
    for name, cls in cluster_pack.NODE_CLASS_MAPPINGS.items():
        assert registry.get(name) is cls and name in registry.builtin  # no pack can replace it
        assert registry.node_info(name)["display_name"] == cluster_pack.NODE_DISPLAY_NAME_MAPPINGS.get(name, name)
