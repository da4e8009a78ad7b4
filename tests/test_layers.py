"""The layers contract (.importlinter): comfy_bridge > nodes > cluster, nothing imports a layer above it.

Run here too, so the README's test command enforces it and not only CI: a module of cluster/ importing
nodes/ or comfy_bridge/, or one of nodes/ importing comfy_bridge/ (imports inside functions included),
fails this test with import-linter's report of the offending lines. With no import upwards, no import
cycle can span two packages either."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_no_layer_imports_a_layer_above_it():
    pytest.importorskip("importlinter", reason="import-linter is in the test extras: pip install -e '.[test]'")
    # In a child with this checkout first on the path: the graph is of these files, not an installed copy.
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True))"
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))},
    )
    assert run.returncode == 0, run.stdout + run.stderr


PACKAGES = ("comfy_bridge", "nodes", "cluster")
# compat/ mirrors ComfyUI's own module names for packs (comfy_execution/progress.py ...), so it is left out.
OWN_MODULES = [p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py") if "compat" not in p.parts]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_private_name_is_used_across_modules():
    """A leading underscore means "this module's business": another module importing such a name, or
    reaching into an imported module for one, couples to an implementation detail (issue 16, item 4)."""
    import ast

    found = []
    for path in OWN_MODULES:
        tree = ast.parse(path.read_text())
        modules = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
                found += [
                    f"{path.relative_to(REPO)}:{node.lineno} imports {node.module}.{a.name}"
                    for a in node.names
                    if _private(a.name)
                ]
                modules |= {a.asname or a.name for a in node.names}
            elif isinstance(node, ast.Import):
                modules |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] in PACKAGES}
        found += [
            f"{path.relative_to(REPO)}:{node.lineno} uses {node.value.id}.{node.attr}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("name", ["executor", "progress", "workspace", "queue", "engine", "cli", "context"])
def test_one_module_per_meaning(name):
    """A reader finds a part by its file name, so the names that once meant different things in
    different packages (an executor process and a prompt executor, a workspace and a tenant's folders,
    ...) are each one module now."""
    same = sorted(str(p.relative_to(REPO)) for p in OWN_MODULES if p.stem == name)
    assert len(same) <= 1, same
