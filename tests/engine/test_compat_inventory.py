"""docs/compat-inventory.json: the ComfyUI names the most used packs import (scripts/compat_inventory.py).
Every module-level one must resolve here (a pack that imports it fails to load otherwise); names used inside
functions that resolved when the inventory was made must still resolve; the Markdown is the JSON's."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = json.loads((ROOT / "docs" / "compat-inventory.json").read_text())


def _script():
    spec = importlib.util.spec_from_file_location("compat_inventory", ROOT / "scripts" / "compat_inventory.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()


@pytest.fixture(scope="module", autouse=True)
def _comfy_names():
    from comfy_bridge import compat

    compat.import_as_comfyui_has()


def test_every_module_level_name_resolves():
    rows = [r for r in INVENTORY["names"] if r["module_level"]]
    assert len(rows) > 200
    assert [r["name"] for r in rows if not SCRIPT.lookup(r["name"])[0]] == []


def test_names_used_inside_functions_stay_present():
    rows = [r for r in INVENTORY["names"] if not r["module_level"] and r["present"]]
    assert [r["name"] for r in rows if not SCRIPT.lookup(r["name"])[0]] == []


def test_the_markdown_is_the_inventory():
    assert (ROOT / "docs" / "compat-inventory.md").read_text() == SCRIPT.markdown(INVENTORY)
