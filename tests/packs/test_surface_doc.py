"""docs/compat-surface.md is generated from the code and stays so; the statuses come from reading the
code (missing names, bodies that only refuse, some paths that refuse), not from a hand-written list."""

from __future__ import annotations

import types
from pathlib import Path

from comfy_bridge.packs.origin import UnsupportedFeature
from comfy_bridge.packs.surface_doc import NOT_SUPPORTED, PARTLY, SUPPORTED, class_rows, classify, module_rows, render

DOC = Path(__file__).resolve().parents[2] / "docs" / "compat-surface.md"


def refuses_always(x):
    """Only refuses."""
    raise UnsupportedFeature("always.refused", "never here")


def refuses_sometimes(x):
    if x:
        raise UnsupportedFeature(f"sometimes({x!r})")
    return x


def works(x):
    return x + 1


class Proxy:
    def _check(self, value):
        if value is None:
            raise UnsupportedFeature("Proxy.helper refusal")

    def uses_helper(self, value):
        self._check(value)
        return value

    def plain(self):
        return 1

    def __getattr__(self, name):
        raise AttributeError(name)


def test_the_committed_document_is_the_generated_one():
    assert DOC.read_text() == render(), (
        "docs/compat-surface.md is stale: run `python -m comfy_bridge.packs.surface_doc > docs/compat-surface.md`"
    )


def test_statuses_are_read_from_the_code():
    assert classify(refuses_always) == (NOT_SUPPORTED, "always.refused: never here")
    assert classify(refuses_sometimes) == (PARTLY, "refuses sometimes(…)")
    assert classify(works) == (SUPPORTED, "")
    assert classify(42) == (SUPPORTED, "")


def test_refusals_in_helpers_and_missing_attributes_are_found():
    rows = {r.name: r for r in class_rows(Proxy, ("uses_helper", "plain", "absent"))}
    assert rows["uses_helper"].status == PARTLY and "Proxy.helper refusal" in rows["uses_helper"].notes
    assert rows["plain"].status == SUPPORTED
    assert rows["absent"].status == NOT_SUPPORTED and "__getattr__" in rows["absent"].notes


def test_module_rows_mark_missing_names_and_modules(monkeypatch):
    import sys

    fake = types.ModuleType("surface_fake")
    fake.works, fake.refuses_always = works, refuses_always
    monkeypatch.setitem(sys.modules, "surface_fake", fake)
    rows = {r.name: r.status for r in module_rows("surface_fake", ("works", "refuses_always", "gone"))}
    assert rows == {"works": SUPPORTED, "refuses_always": NOT_SUPPORTED, "gone": NOT_SUPPORTED}
    assert {r.notes for r in module_rows("no_such_module_here", ("x",))} == {"no `no_such_module_here` module"}


def test_the_coverage_section_quotes_the_inventory(tmp_path):
    from comfy_bridge.packs.surface_doc import coverage_lines

    inventory = tmp_path / "inventory.json"
    inventory.write_text(
        '{"coverage": {"module_level": {"names": 8, "supported": 6},'
        ' "inside_functions": {"names": 200, "supported": 191}}}'
    )
    text = "\n".join(coverage_lines(inventory))
    assert "(compat-inventory.md)" in text
    assert "6 of 8 (75.0 %) of the names used at module level" in text
    assert "191 of 200 (95.5 %) of those used inside functions" in text
    assert "\n".join(coverage_lines()) in DOC.read_text()
