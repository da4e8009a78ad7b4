"""The same workflow, seed and thread count give bit-identical PNGs in two processes."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(workspace, out_dir) -> bytes:
    cmd = [
        sys.executable,
        "-m",
        "comfy_bridge.cli",
        "run",
        str(REPO / "workflows_json" / "text_to_image.json"),
        "--workspace",
        str(workspace),
        "--threads",
        "1",
        "--quiet",
    ]
    env_out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO)
    path = env_out.stdout.strip().splitlines()[-1]
    return open(path, "rb").read()


def test_two_processes_give_identical_png(demo_workspace, tmp_path):
    first = _run(demo_workspace.root, tmp_path)
    second = _run(demo_workspace.root, tmp_path)
    assert hashlib.sha256(first).hexdigest() == hashlib.sha256(second).hexdigest()
