"""The torch pin file a process writes for the pip runs of its packs (pip_guard) lives as long as that
process: a clean exit removes it, and a killed process's file is removed by the next one that writes its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PINS_PREFIX = "comfy-cluster-torch-pins-"

REPO = Path(__file__).resolve().parents[2]
CODE = (
    "import sys\n"
    "from comfy_bridge.packs.pip_guard import guard_pack_installs_at_runtime\n"
    "pins = guard_pack_installs_at_runtime({})\n"
    "print(pins, pins.exists(), flush=True)\n"
)


def _run(tmp: Path, code: str = CODE) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(tmp)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_clean_exit_removes_its_pin_file(tmp_path):
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr
    path, existed = done.stdout.split()
    assert existed == "True" and Path(path).parent == tmp_path
    assert list(tmp_path.glob(f"{PINS_PREFIX}*")) == []


def test_the_pin_file_of_a_killed_process_is_removed_by_the_next(tmp_path):
    killed = _run(tmp_path, CODE + "import os; os._exit(0)\n")  # no exit handlers, as after a SIGKILL
    left = Path(killed.stdout.split()[0])
    assert left.exists()
    alive = tmp_path / f"{PINS_PREFIX}{os.getpid()}.txt"  # a running process's file stays
    alive.write_text("torch==0\n")
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert not left.exists() and alive.exists()
