"""scripts/packs_check.py, the harness that runs real node packs against ComfyUI's recordings: its manifest pins
40 packs by commit (and holds no pack code), it reads a failed import and its missing name from the startup
log our loader writes (the format ComfyUI writes), and it reports a pack as working only when nodes, web
files, routes and cases all match."""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import sys
from pathlib import Path

from comfy_bridge.custom_nodes import load_custom_nodes
from comfy_bridge.registry import NodeRegistry

REPO = Path(__file__).resolve().parents[2]


def harness():
    spec = importlib.util.spec_from_file_location("packs_check", REPO / "scripts" / "packs_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["packs_check"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_manifest_pins_forty_distinct_packs_by_commit_and_keeps_no_code():
    data = json.loads((REPO / "tests" / "packs" / "real_packs" / "manifest.json").read_text())
    packs = data["packs"]
    assert len(packs) == 40
    assert len({p["folder"] for p in packs}) == 40
    for p in packs:
        assert re.fullmatch(r"[0-9a-f]{40}", p["commit"]), p
        assert p["repo"].startswith("https://github.com/")
        assert p["commit_date"] <= "2025-10-13"  # as they were when ComfyUI 0.3.64 was current
    stars = [p["stars"] for p in packs]
    assert stars == sorted(stars, reverse=True)  # the most starred first, none left out between them
    assert not list((REPO / "tests" / "packs" / "real_packs").rglob("*.py"))


async def test_failed_import_and_its_missing_name_are_read_from_the_startup_log(tmp_path, caplog):
    packs = tmp_path / "custom_nodes"
    (packs / "broken").mkdir(parents=True)
    (packs / "broken" / "__init__.py").write_text("from json import no_such_name\n")
    (packs / "fine").mkdir()
    (packs / "fine" / "__init__.py").write_text("NODE_CLASS_MAPPINGS = {}\n")
    with caplog.at_level(logging.INFO, logger="comfy_bridge.custom_nodes"):
        await load_custom_nodes(NodeRegistry(), [packs])
    log_text = "\n".join(record.getMessage() for record in caplog.records)
    failures = harness().import_failures(log_text)
    assert list(failures) == ["broken"]
    assert failures["broken"].startswith("ImportError: cannot import name 'no_such_name' from 'json'")


def test_a_pack_works_only_when_nodes_web_files_routes_and_cases_match():
    h = harness()
    real = {"nodes": ["A", "B"], "extensions": ["/extensions/p/a.js"], "routes": {"/p/x": 200, "/p/y": 404}}
    ours = {
        "imported": True,
        "error": None,
        "nodes": ["A", "B", "C"],
        "extensions": ["/extensions/p/a.js"],
        "routes": {"/p/x": 201, "/p/y": 404},
    }
    good = h.compare("p", real, ours, {"/extensions/p/a.js": 200})
    assert good.works and good.nodes_expected == 2
    assert not h.compare("p", real, ours | {"nodes": ["A"]}, {}).works
    assert not h.compare("p", real, ours | {"routes": {"/p/x": 500, "/p/y": 404}}, {}).works
    assert not h.compare("p", real, ours, {"/extensions/p/a.js": 404}).works
    good.cases = [{"case": "c", "ok": False, "why": "output of node 3 differs"}]
    assert not good.works


def test_case_outputs_must_equal_comfyuis():
    h = harness()
    image = {"images": [{"shape": [8, 8, 3], "sha256": "ab"}]}
    expected = {"status": "success", "outputs": {"3": image}}
    assert h.same_outputs(expected, {"status": "success", "outputs": {"3": image}})[0]
    assert not h.same_outputs(expected, {"status": "success", "outputs": {"3": {"images": []}}})[0]
    assert not h.same_outputs(expected, {"status": "execution_error"})[0]


def test_routes_that_name_an_action_are_never_asked():
    h = harness()
    for path in (
        "/manager/reboot",
        "/manager/queue/update_all",
        "/snapshot/restore",
        "/easyuse/reboot",
        "/impact/set/pb_id_image",
        "/customnode/fetch_updates",
    ):
        assert h.is_action(path), path
    for path in ("/manager/queue/status", "/snapshot/getlist", "/rgthree/link_fixer", "/pysssss/workflows"):
        assert not h.is_action(path), path


def test_the_recorded_registry_covers_every_pack_of_the_manifest():
    real_packs = REPO / "tests" / "packs" / "real_packs"
    folders = {p["folder"] for p in json.loads((real_packs / "manifest.json").read_text())["packs"]}
    registry = json.loads((real_packs / "comfyui_0_3_64" / "registry.json").read_text())["packs"]
    assert set(registry) == folders
    for folder, entry in registry.items():
        assert entry["imported"] == (entry["error"] is None), folder
        assert all(url.startswith(f"/extensions/{folder}/") for url in entry["extensions"]), folder
    cases = {p.stem for p in (real_packs / "cases").glob("*.json")}
    assert cases <= folders and all((real_packs / "comfyui_0_3_64" / f"{c}.json").is_file() for c in cases)
