"""scripts/gpu_check.sh on the CPU: its dry run's exact commands of the GPU run, each under its own time limit,
together (with each step's 5 s kill grace) a margin under the device tool's advised 450 s, NVSHMEM last, every
log under $OUT; a missing wheel stops it; a run cut short still leaves a summary saying where it was; and the
pair script uses nothing NVSHMEM's several-processes-per-GPU mode lacks."""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def wheel_names() -> list[str]:
    reqs = [
        line.strip()
        for line in (REPO / "scripts" / "gpu_wheels.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    names = []
    for req in reqs:
        name, version = req.split("==")
        names.append(f"{re.sub(r'[-_.]+', '_', name.lower())}-{version}-py3-none-any.whl")
    return names


def dry_run(wheels: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "scripts/gpu_check.sh", "--dry-run"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "WHEELS": str(wheels), "OUT": str(out), "PY": "python3"},
    )


def test_the_dry_run_prints_every_step_with_its_limit_and_nvshmem_last(tmp_path):
    for name in wheel_names():
        (tmp_path / name).write_bytes(b"")
    out = tmp_path / "out"
    run = dry_run(tmp_path, out)
    assert run.returncode == 0, run.stderr
    steps = re.findall(r"^\[([\w-]+), (\d+)s\] timeout -k 5 (\d+) (.*) >> (\S+) 2>&1$", run.stdout, re.M)
    assert [s[0] for s in steps] == [
        "env",
        "install",
        "env-after-install",
        "units",
        "e2e",
        "nvshmem-one",
        "nvshmem-pair",
        "serve-nvshmem",
    ]
    assert all(limit == again for _, limit, again, _, _ in steps)
    assert sum(int(limit) + 5 for _, limit, _, _, _ in steps) <= 420  # 450 advised, less a margin
    assert all(Path(log).parent == out for *_, log in steps)
    assert len({log for *_, log in steps}) + 2 <= 8  # + e2e-server.log and summary.txt: what comes back
    commands = {name: command for name, _, _, command, _ in steps}
    assert all(str(tmp_path / name) in commands["install"] for name in wheel_names())
    assert "--no-index" in commands["install"] and "--no-deps" in commands["install"]
    assert "tests/dataplane/test_nvshmem_arena.py" in commands["nvshmem-one"]
    assert "scripts/gpu_nvshmem_pair.py" in commands["nvshmem-pair"]
    unquoted = {name: command.replace("\\", "") for name, command in commands.items()}  # printf %q escapes []
    assert unquoted["e2e"].endswith("[shm]") and unquoted["serve-nvshmem"].endswith("[nvshmem]")
    assert "COMFY_CLUSTER_GPU_CHECK=1" in run.stdout  # nvshmem4py missing fails instead of skipping
    # one demo workspace for every step that needs one (built once, by the first)
    assert re.search(r"^export .*COMFY_CLUSTER_TEST_WORKSPACE=\S+", run.stdout, re.M)
    # the pair script's own deadline ends a hung join inside its step
    limits = {name: int(limit) for name, limit, *_ in steps}
    deadline = re.search(r"--deadline (\d+)$", unquoted["nvshmem-pair"])
    assert deadline and int(deadline.group(1)) < limits["nvshmem-pair"]
    # every wheel listed, blake3 among them; the torch there is used as found (none brought, none installed)
    listed = re.findall(r"^#   (\S+\.whl)$", run.stdout, re.M)
    assert sorted(listed) == sorted(wheel_names()) and any(n.startswith("blake3-") for n in listed)
    assert not any(n.split("-")[0] in ("torch", "torchvision", "comfy_cluster") for n in listed)
    assert "import torch; print" in run.stdout.replace("\\", "")  # the summary says which torch ran


def test_a_missing_wheel_stops_the_check_before_it_runs_anything(tmp_path):
    names = wheel_names()
    for name in names[:-1]:
        (tmp_path / name).write_bytes(b"")
    run = dry_run(tmp_path, tmp_path / "out")
    assert run.returncode == 1
    assert names[-1].split("-")[0] in run.stderr and "[env" not in run.stdout


FAKE_PYTHON = """#!/bin/bash
# stands for python3 on the GPU machine: every step passes at once, but the units step hangs
case "$*" in
  *"import torch"*) echo "torch 2.11.0+cu130 CUDA 13.0 devices 1" ;;
  *test_layer_cache_cuda*) sleep 20 ;;
  *) echo "1 passed" ;;
esac
"""


def test_a_run_cut_short_still_says_which_torch_and_where_it_stopped(tmp_path):
    for name in wheel_names():
        (tmp_path / name).write_bytes(b"")
    py = tmp_path / "python3"
    py.write_text(FAKE_PYTHON)
    py.chmod(0o755)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        ["bash", "scripts/gpu_check.sh"],
        cwd=REPO,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={
            "PATH": "/usr/bin:/bin",
            "WHEELS": str(tmp_path),
            "OUT": str(out),
            "PY": str(py),
            "WORK": str(tmp_path / "work"),
            "SITE": str(tmp_path / "site"),
            "T_UNITS": "30",
        },
    )
    summary = out / "summary.txt"
    deadline = time.monotonic() + 30
    while "units: running" not in (summary.read_text() if summary.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)  # the device tool's limit ends the whole run mid-step
    proc.wait()
    lines = summary.read_text().splitlines()
    assert lines[0] == "torch 2.11.0+cu130 CUDA 13.0 devices 1"
    assert [line.split(":")[0] for line in lines if "passed in" in line] == ["env", "install", "env-after-install"]
    assert lines[-1] == "units: running (limit 30s)"


def test_the_pair_script_uses_nothing_the_several_processes_per_gpu_mode_lacks():
    """Two PEs on one GPU: no team split and no team collective, only barrier_all (in it and in the arena)."""
    allowed = {
        "init",
        "finalize",
        "get_unique_id",
        "my_pe",
        "n_pes",
        "tensor",
        "free_tensor",
        "get",
        "get_nbi",
        "quiet",
        "barrier_all",
    }
    used = set()
    for path in ("scripts/gpu_nvshmem_pair.py", "cluster/dataplane/arena.py", "cluster/dataplane/nvshmem_team.py"):
        tree = ast.parse((REPO / path).read_text())
        used |= {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and ast.unparse(node.value) in ("nvshmem", "self._nv")
        }
    assert used and used <= allowed, used - allowed
