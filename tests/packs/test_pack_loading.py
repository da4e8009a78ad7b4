"""Packs load as ComfyUI loads them: V1 and V3, folders and single files, from every custom_nodes path
(extra_model_paths.yaml included); .disabled skipped; prestartup scripts first; failures recorded
without stopping the others; core nodes cannot be replaced; whitelist with custom nodes disabled."""

from __future__ import annotations

import sys

from comfy_bridge.packs.origin import origin_of
from comfy_bridge.registry import build_registry


def test_v1_v3_file_and_folder_packs_are_registered(packs_registry):
    for name in ("V1Invert", "V1Progress", "V3Scale", "PatchCFG", "RaisingNode", "HangNode"):
        assert name in packs_registry.classes
    assert packs_registry.display_names["V1Invert"] == "Invert (v1 pack)"
    assert packs_registry.display_names["V3Scale"] == "Scale (v3 pack)"
    info = packs_registry.node_info("V1Invert")
    assert info["python_module"] == "custom_nodes.v1_pack" and info["category"] == "v1_pack"
    assert packs_registry.node_info("V3Scale")["python_module"] == "custom_nodes.v3_pack"


def test_extra_model_paths_custom_nodes_folder_is_loaded(packs_registry, packs_ws):
    assert "ExtraDouble" in packs_registry.classes
    assert origin_of(packs_registry.classes["ExtraDouble"]).path == str(packs_ws.root / "more_nodes" / "extra_pack.py")


def test_core_nodes_are_not_replaced_by_a_pack(packs_registry):
    import nodes

    assert packs_registry.classes["KSampler"] is nodes.NODE_CLASS_MAPPINGS["KSampler"]
    assert origin_of(packs_registry.classes["KSampler"]) is None


def test_failed_import_is_recorded_and_disabled_pack_skipped(packs_registry, packs_ws):
    failures = packs_registry.import_failures
    broken = str(packs_ws.root / "custom_nodes" / "broken_pack")
    assert list(failures) == [broken]
    assert "a_module_that_does_not_exist" in failures[broken]
    assert not any("disabled_pack" in key for key in sys.modules)
    assert "broken_pack" not in str(packs_registry.object_info())


def test_prestartup_script_runs_before_the_pack_imports(packs_registry, packs_ws):
    module = sys.modules[str(packs_ws.root / "custom_nodes" / "v1_pack")]
    assert module.PRESTARTUP_SEEN == "ran"


def test_failing_prestartup_script_is_logged_and_loading_goes_on(tmp_path, caplog):
    from comfy_bridge.custom_nodes import run_prestartup_scripts
    from nodes.workspace import Workspace, activate

    ws = activate(Workspace(tmp_path / "ws").create())
    bad = ws.root / "custom_nodes" / "bad_start"
    bad.mkdir()
    (bad / "prestartup_script.py").write_text("raise RuntimeError('no start for you')")
    (bad / "__init__.py").write_text(
        "class N:\n  @classmethod\n  def INPUT_TYPES(cls): return {}\n  RETURN_TYPES = ()\n  FUNCTION = 'f'\n"
        "NODE_CLASS_MAPPINGS = {'BadStartNode': N}\n"
    )
    assert run_prestartup_scripts([ws.root / "custom_nodes"]) == {str(bad / "prestartup_script.py"): False}
    registry = build_registry(ws)
    assert "BadStartNode" in registry.classes
    assert "Failed to execute startup-script" in caplog.text


def test_whitelist_loads_only_named_packs_when_custom_nodes_are_disabled(packs_ws):
    registry = build_registry(packs_ws, load_custom_nodes=False, whitelist=["v3_pack.py"])
    assert "V3Scale" in registry.classes
    assert "V1Invert" not in registry.classes and "ExtraDouble" not in registry.classes
    assert "V1Invert" not in build_registry(packs_ws, load_custom_nodes=False).classes
