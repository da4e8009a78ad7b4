"""cluster/ in rooms by concern (issue 37): few modules at its top, no class that is a hub, and each
class name meaning one thing in the whole project."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLUSTER = REPO / "cluster"
MAX_CLASS_LINES = 400
MAX_TOP_MODULES = 10  # the seam (modelfn, refs, runtime, messages, secret) and the runtimes; the rest in rooms


def classes(root: Path) -> list[tuple[str, int, str]]:
    """(name, lines, module) of every class defined under `root`."""
    found = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                found.append((node.name, node.end_lineno - node.lineno + 1, str(path.relative_to(REPO))))
    return found


def test_no_class_in_cluster_is_a_hub():
    big = [f"{module}: {name} has {n} lines" for name, n, module in classes(CLUSTER) if n > MAX_CLASS_LINES]
    assert not big, big


def test_cluster_keeps_few_modules_at_its_top():
    top = sorted(p.name for p in CLUSTER.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top


def test_a_class_name_means_one_thing_in_the_project():
    """A public class name is defined in one module of the project. comfy_bridge/compat is left out: it mirrors
    ComfyUI's own module surface for node packs, names included."""
    where: dict[str, set[str]] = defaultdict(set)
    for package in ("cluster", "nodes", "comfy_bridge"):
        for name, _, module in classes(REPO / package):
            if not name.startswith("_") and not module.startswith("comfy_bridge/compat/"):
                where[name].add(module)
    twice = {name: sorted(modules) for name, modules in where.items() if len(modules) > 1}
    assert not twice, twice
