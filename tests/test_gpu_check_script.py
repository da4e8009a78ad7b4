"""scripts/gpu_check.sh --dry-run on the CPU: the exact commands of the GPU run, each under its own time
limit, together under 7 minutes, NVSHMEM last, every log under $OUT; and a missing wheel stops it."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def wheel_names() -> list[str]:
    reqs = [line.strip() for line in (REPO / "scripts" / "gpu_wheels.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    names = []
    for req in reqs:
        name, version = req.split("==")
        names.append(f"{re.sub(r'[-_.]+', '_', name.lower())}-{version}-py3-none-any.whl")
    return names


def dry_run(wheels: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "scripts/gpu_check.sh", "--dry-run"], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin", "WHEELS": str(wheels), "OUT": str(out),
                                           "PY": "python3"})


def test_the_dry_run_prints_every_step_with_its_limit_and_nvshmem_last(tmp_path):
    for name in wheel_names():
        (tmp_path / name).write_bytes(b"")
    out = tmp_path / "out"
    run = dry_run(tmp_path, out)
    assert run.returncode == 0, run.stderr
    steps = re.findall(r"^\[([\w-]+), (\d+)s\] timeout -k 5 (\d+) (.*) >> (\S+) 2>&1$", run.stdout, re.M)
    assert [s[0] for s in steps] == ["env", "install", "env-after-install", "units", "e2e", "nvshmem-one",
                                     "nvshmem-pair", "serve-nvshmem"]
    assert all(limit == again for _, limit, again, _, _ in steps)
    assert sum(int(limit) for _, limit, _, _, _ in steps) < 7 * 60
    assert all(Path(log).parent == out for *_, log in steps)
    assert len({log for *_, log in steps}) + 2 <= 8     # + e2e-server.log and summary.txt: what comes back
    commands = {name: command for name, _, _, command, _ in steps}
    assert all(str(tmp_path / name) in commands["install"] for name in wheel_names())
    assert "--no-index" in commands["install"] and "--no-deps" in commands["install"]
    assert "tests/dataplane/test_nvshmem_arena.py" in commands["nvshmem-one"]
    assert "scripts/gpu_nvshmem_pair.py" in commands["nvshmem-pair"]
    unquoted = {name: command.replace("\\", "") for name, command in commands.items()}   # printf %q escapes []
    assert unquoted["e2e"].endswith("[shm]") and unquoted["serve-nvshmem"].endswith("[nvshmem]")
    assert "COMFY_CLUSTER_GPU_CHECK=1" in run.stdout        # nvshmem4py missing fails instead of skipping


def test_a_missing_wheel_stops_the_check_before_it_runs_anything(tmp_path):
    names = wheel_names()
    for name in names[:-1]:
        (tmp_path / name).write_bytes(b"")
    run = dry_run(tmp_path, tmp_path / "out")
    assert run.returncode == 1
    assert names[-1].split("-")[0] in run.stderr and "[env" not in run.stdout
