"""The repository fits what travels to the GPU machine: the device tool copies the working tree (tracked and
untracked-not-ignored files) and the brought wheels, 64 MiB at most, and refuses a larger one outright, so the
first GPU run would never start. scripts/gpu_check.sh --dry-run checks the real total before a run; this keeps
the tracked files, with the wheels' budget, under its limit on every change. A recorder whose outputs are large
keeps a strided grid of them (scripts/comfyui_recording.py's MAX_RECORDED_VALUES; tests/recorded_tensors.py), and
writes its fixture as <name>.json.xz (comfyui_recording's write_json; tests read it with recorded_tensors.load_json):
compressing the 30 largest fixtures (21.1 MiB of JSON -> 10.8 MiB) took the tracked files from 46.8 MiB to 36.5 MiB
of the 47 MiB that the wheels' 16 MiB budget leaves under the 63 MiB limit."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GPU_CHECK = (REPO / "scripts" / "gpu_check.sh").read_text()


def _mib(name: str) -> int:
    return int(re.search(rf"^{name}=(\d+)$", GPU_CHECK, re.MULTILINE).group(1))


def _tracked_bytes() -> tuple[int, list[tuple[int, str]]]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: which files are tracked is unknown")
    names = (
        subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
    )
    sizes = [((REPO / n).stat().st_size, n) for n in names if n and (REPO / n).is_file()]
    return sum(s for s, _ in sizes), sorted(sizes, reverse=True)


def test_tracked_files_and_the_wheel_budget_fit_the_travel_limit() -> None:
    wheel_budget, limit = _mib("WHEEL_BUDGET_MIB"), _mib("TRAVEL_LIMIT_MIB")
    assert limit < 64, "the limit keeps a margin under the device tool's 64 MiB"
    tracked, sizes = _tracked_bytes()
    largest = ", ".join(f"{name} ({size >> 10} KiB)" for size, name in sizes[:5])
    assert tracked + (wheel_budget << 20) <= limit << 20, (
        f"tracked files {tracked / 2**20:.1f} MiB + wheels {wheel_budget} MiB exceed the {limit} MiB that may travel"
        f" to the GPU machine; largest: {largest}"
    )
