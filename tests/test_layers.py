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
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO),
                                                                                       os.environ.get("PYTHONPATH"))))})
    assert run.returncode == 0, run.stdout + run.stderr
