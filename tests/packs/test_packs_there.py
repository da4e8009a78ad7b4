"""The "there" side of the packs harness (scripts/packs_there.py): /object_info entries compared whole but for
prose, GET routes by body where ComfyUI answers the same twice, ComfyUI's import log read per pack, and the
table saying which packs have no ComfyUI result yet."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


there = load("packs_there")
today = load("packs_today")

ENTRY = {
    "input": {"required": {"image": ["IMAGE", {"tooltip": "the image"}], "n": ["INT", {"default": 1, "min": 0}]}},
    "input_order": {"required": ["image", "n"]},
    "output": ["IMAGE"],
    "output_name": ["IMAGE"],
    "output_tooltips": ["the result"],
    "name": "Flip",
    "display_name": "Flip",
    "description": "Flips an image.",
    "python_module": "custom_nodes.pack",
    "category": "image",
    "output_node": False,
}


def copy(value):
    return json.loads(json.dumps(value))


def test_entries_equal_but_for_prose_are_equal():
    other = copy(ENTRY)
    other["description"] = "Mirrors the picture."
    other["input"]["required"]["image"][1]["tooltip"] = "what to flip"
    other["output_tooltips"] = ["flipped"]
    result = there.compare_nodes({"Flip": ENTRY}, {"Flip": other})
    assert (result["equal"], result["of"], result["differences"]) == (1, 1, {})


def test_any_other_field_makes_entries_differ_and_says_where():
    for change in (
        lambda e: e["input"]["required"]["n"][1].__setitem__("default", 2),
        lambda e: e.__setitem__("category", "image/transform"),
        lambda e: e["input"]["required"].pop("n"),
        lambda e: e.__setitem__("output_node", 0),  # 0 is not False in JSON a client reads
        lambda e: e.__setitem__("input_order", {"optional": [], "required": ["image", "n"]}),
    ):
        other = copy(ENTRY)
        change(other)
        result = there.compare_nodes({"Flip": ENTRY}, {"Flip": other})
        assert result["equal"] == 0 and result["differences"]["Flip"], change
    assert there.compare_nodes({}, {"Flip": ENTRY})["differences"] == {"Flip": ["only there"]}
    assert there.compare_nodes({"Flip": ENTRY}, {})["differences"] == {"Flip": ["only here"]}
    ours = {"Flip": {**ENTRY, "dev_only": False}, "Deep": ENTRY, "Old": ENTRY}
    theirs = {"Flip": ENTRY, "Deep": {**ENTRY, "category": "x"}, "Old": {**ENTRY, "search_aliases": []}}
    counted = there.compare_nodes(ours, theirs)
    assert (counted["equal"], counted["equal_but_keys_one_side_lacks"]) == (0, 2)
    assert counted["keys_one_side_lacks"] == {"dev_only: only here": 1, "search_aliases: only there": 1}
    moved = {k: ENTRY[k] for k in reversed(list(ENTRY))}  # same values, ComfyUI's key order not kept
    assert "key order" in there.compare_nodes({"Flip": moved}, {"Flip": ENTRY})["differences"]["Flip"][0]


def test_pack_entries_are_those_of_its_module():
    info = {
        "Flip": ENTRY,
        "Core": {**ENTRY, "python_module": "nodes"},
        "Sub": {**ENTRY, "python_module": "custom_nodes.pack.sub"},
    }
    info["Other"] = {**ENTRY, "python_module": "custom_nodes.pack2"}
    assert sorted(there.pack_entries(info, "pack")) == ["Flip", "Sub"]


def test_routes_compare_by_body_when_comfyui_answers_the_same_twice():
    same = there.compare_route((200, b'{"a": 1, "b": [2]}'), (200, b'{"a":1,"b":[2]}'), (200, b'{"a":1,"b":[2]}'))
    assert (same["by"], same["equal"]) == ("body", True)  # JSON spacing aside
    other = there.compare_route((200, b'{"a": 2}'), (200, b'{"a": 1}'), (200, b'{"a": 1}'))
    assert (other["by"], other["equal"]) == ("body", False)
    text = there.compare_route((200, b"hello"), (200, b"hello!"), (200, b"hello!"))
    assert (text["by"], text["equal"]) == ("body", False)
    status = there.compare_route((500, b"x"), (200, b"x"), (200, b"x"))
    assert status["equal"] is False


def test_routes_compare_by_status_when_comfyui_answers_differently_twice():
    varying = there.compare_route((200, b"t=3"), (200, b"t=1"), (200, b"t=2"))
    assert (varying["by"], varying["equal"]) == ("status", True)
    failing = there.compare_route((404, b"t=3"), (200, b"t=1"), (200, b"t=2"))
    assert (failing["by"], failing["equal"]) == ("status", False)


def test_a_route_a_server_did_not_answer_is_never_equal():
    # Manager's and Easy-Use's GET /reboot took both servers down: every later route "answered" status 0 on both
    dead = there.compare_route((0, b"URLError"), (0, b"URLError"), (0, b"URLError"))
    assert (dead["by"], dead["equal"]) == ("no answer", False)
    gone_here = there.compare_route((0, b"URLError"), (200, b"{}"), (200, b"{}"))
    assert (gone_here["by"], gone_here["equal"]) == ("no answer", False)


def test_routes_that_name_an_action_are_never_requested(monkeypatch):
    asked = []

    def http(url, data=None, timeout=60):
        asked.append(url)
        return 200, b"{}"

    monkeypatch.setattr(there, "http", http)
    paths = ("/api/manager/reboot", "/api/easyuse/reboot", "/api/snapshot/save", "/api/manager/version", "/n/{id}")
    routes = [{"method": "GET", "path": p} for p in paths] + [{"method": "POST", "path": "/api/manager/version2"}]
    side = there.server_side("http://s", "pack", routes)
    assert list(side["answers"]) == ["/api/manager/version"]
    assert asked == ["http://s/object_info", "http://s/api/manager/version", "http://s/api/manager/version"]
    assert [r["path"] for r in routes if not there.requested(r)] == [*paths[:3], "/n/{id}", "/api/manager/version2"]


def test_the_import_log_is_read_per_folder():
    log = (
        "Import times for custom nodes:\n"
        "   0.0 seconds: /b/custom_nodes/websocket_image_save.py\n"
        "   0.3 seconds (IMPORT FAILED): /b/custom_nodes/broken-pack\n"
        "   1.2 seconds: /b/custom_nodes/good-pack\n"
    )
    assert there.import_outcome(log, "good-pack") is True
    assert there.import_outcome(log, "broken-pack") is False
    assert there.import_outcome(log, "good") is None


def test_cases_compare_every_output_digest():
    here = {"outputs": [[{"tensor": [1, 8, 8, 3], "sha256": "aa"}]], "ui": None}
    assert there.compare_case(here, {"ok": True, **copy(here)}) is True
    assert there.compare_case(here, {"ok": True, "outputs": [[{"tensor": [1, 8, 8, 3], "sha256": "ab"}]]}) is False
    assert there.compare_case(here, {"ok": False}) is None


def test_the_origin_comes_from_the_checkout_not_from_system_stats(tmp_path):
    for name in ("main.py", "server.py", "execution.py", "nodes.py"):
        (tmp_path / name).write_text(name)
    (tmp_path / "comfyui_version.py").write_text('__version__ = "0.10.0"\n')
    origin = there.comfyui_origin(tmp_path)
    assert (origin["version"], origin["commit"]) == ("0.10.0", None)
    assert origin["read_from"].startswith("comfyui_version.py")
    (tmp_path / "execution.py").write_text("changed")
    assert there.comfyui_origin(tmp_path)["core_files_sha256"] != origin["core_files_sha256"]


def test_the_table_says_which_packs_have_no_comfyui_result_yet():
    measured = {
        "folder": "a",
        "repo": "o/a",
        "commit": "1" * 40,
        "imported": True,
        "nodes_declared": 2,
        "nodes_listed": 2,
        "cases": [{"node": "Flip", "ok": True}],
        "attempts": [{"node": "Flip", "ok": True}],
        "there": {
            "comfyui": {
                "version": "0.10.0",
                "commit": None,
                "read_from": "comfyui_version.py (not a git checkout)",
                "core_files_sha256": {"sha256": "ff"},
            },
            "imported": True,
            "nodes": {"equal": 1, "of": 2, "equal_but_keys_one_side_lacks": 1},
            "case": {"ok": True, "equal": False},
            "routes": {"/a": {"by": "body", "equal": True}, "/b": {"by": "status", "equal": True}},
        },
    }
    bare = {**measured, "folder": "b", "repo": "o/b"}
    bare.pop("there")
    data = {
        "packs": [measured, bare],
        "left_out": [],
        "summary": today.summary([measured, bare]),
        "date": "2026-12-05",
        "comfy_cluster_commit": "c" * 40,
        "machine": "m",
        "environment": "e",
    }
    block = today.docs_block(data)
    assert "**1 of 2 packs have both sides**" in block
    assert "No ComfyUI result yet (1): b." in block
    rows = [line for line in block.splitlines() if line.startswith("| [")]
    assert (
        "| yes / yes | 2 / 2 | 1 of 2 (+1 but for top-level keys one side lacks) | 1 (Flip) | ok (no) | 1 of 1 (+1 of 1 by status) |"
        in rows[0]
    )
    assert rows[1].count("no result yet") == 4


def test_a_pack_whose_comfyui_never_served_gets_a_row():
    # Allor exits the process at import: ComfyUI never answered, so there are no entries to compare
    row = {"imported": False, "ready": False, "nodes": None, "case": None, "routes": None}
    assert today.there_cells({"there": row}) == ("no", "-", "-", "none")
