"""A pack whose import calls sys.exit (ComfyUI-Allor's rembg without an onnxruntime backend does) is an import
failure like any other: the server keeps loading the other packs and serving, where ComfyUI's loader, which
catches only Exception, stops."""

from __future__ import annotations

from comfy_bridge.registry import build_registry


def test_sys_exit_while_a_pack_imports_fails_only_that_pack(tmp_path):
    from nodes.workspace import Workspace, activate

    ws = activate(Workspace(tmp_path / "ws").create())
    (ws.root / "custom_nodes" / "exits_pack").mkdir()
    (ws.root / "custom_nodes" / "exits_pack" / "__init__.py").write_text(
        "import sys\nprint('No onnxruntime backend found.')\nsys.exit(1)\n"
    )
    (ws.root / "custom_nodes" / "zz_after.py").write_text(
        "class N:\n  @classmethod\n  def INPUT_TYPES(cls): return {}\n  RETURN_TYPES = ()\n  FUNCTION = 'f'\n"
        "NODE_CLASS_MAPPINGS = {'AfterTheExit': N}\n"
    )
    registry = build_registry(ws)
    failure = registry.import_failures[str(ws.root / "custom_nodes" / "exits_pack")]
    assert "SystemExit: 1" in failure
    assert "AfterTheExit" in registry.classes
