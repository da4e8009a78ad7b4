"""The demo models built once per test session and put into each fresh workspace that needs them as hard links."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

_built_models: Path | None = None


def _demo_models() -> Path:
    """A models folder with every demo model, built once per test session (removed when it ends)."""
    global _built_models
    if _built_models is None:
        from nodes.models.demo import build_demo_models

        root = Path(tempfile.mkdtemp(prefix="comfy-cluster-demo-models-"))
        atexit.register(shutil.rmtree, root, True)
        build_demo_models(root)
        _built_models = root
    return _built_models


def seed_demo_models(workspace: Path) -> None:
    """What serve's first start builds on a workspace without checkpoints (comfy_bridge.cli.demo_models), put there
    beforehand as hard links to the session's one build: the same bytes (the build is deterministic), without half
    a minute of CPU per test. A workspace that has checkpoints is left as it is."""
    models = workspace / "models"
    if any((models / "checkpoints").glob("*.safetensors")):
        return
    source = _demo_models()
    for path in source.rglob("*"):
        target = models / path.relative_to(source)
        if not path.is_file() or target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, target)
        except OSError:  # another file system
            shutil.copy2(path, target)
