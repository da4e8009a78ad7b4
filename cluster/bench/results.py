"""Every `comfy-cluster bench NAME` writes its result as JSON: what ran, where, on which commit, under what load,
every round, and the figure the docs quote. README.md and docs/benchmarks.md name these files beside each
figure (`<!-- figure: docs/benchmarks/NAME.json#/figure/... -->`) and tests/test_figures.py compares them, so a
figure cannot change without its run.

The folder is `docs/benchmarks` under the current directory (the repository root when run from a checkout), or
$COMFY_CLUSTER_RESULTS when set. Lives in cluster/ (the lowest layer) so benches of every layer can use it.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ENV_DIR = "COMFY_CLUSTER_RESULTS"


def results_dir() -> Path:
    return Path(os.environ.get(ENV_DIR) or Path.cwd() / "docs" / "benchmarks")


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], capture_output=True, text=True, timeout=10, cwd=Path(__file__).resolve().parent
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _machine() -> dict[str, Any]:
    return {
        "host": platform.node(),
        "system": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


@dataclass
class Run:
    """One bench run: made when it starts (the load average then), written when it ends."""

    name: str
    argv: list[str]
    started: float = field(default_factory=time.time)
    load_start: tuple[float, ...] = field(default_factory=os.getloadavg)

    def write(self, rounds: Any, figure: dict[str, Any], out: Path | None = None, **extra: Any) -> Path:
        """Write `NAME.json` (or `out`): `rounds` every measurement made, `figure` what the docs quote."""
        path = out or results_dir() / f"{self.name}.json"
        status = _git("status", "--porcelain", "--untracked-files=no")
        doc = {
            "bench": self.name,
            "command": " ".join(["comfy-cluster", "bench", self.name, *self.argv]),
            "commit": _git("rev-parse", "HEAD"),
            "dirty": bool(status) if status is not None else None,
            "date": datetime.fromtimestamp(self.started, UTC).isoformat(timespec="seconds"),
            "duration_s": round(time.time() - self.started, 1),
            "machine": _machine(),
            "load_average": {"start": list(self.load_start), "end": list(os.getloadavg())},
            "figure": figure,
            "rounds": rounds,
            **extra,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=1, default=str) + "\n")
        print(f"result written to {path}", file=sys.stderr)
        return path


def begin(name: str, argv: Sequence[str] | None) -> Run:
    return Run(name, list(argv or []))
