"""`comfy-cluster serve` with executors leaves nothing behind: after SIGTERM, after Ctrl-C (SIGINT to the
whole process group, as a terminal sends it, with no traceback) and after a SIGKILL of an executor or of
the head and a restart, /dev/shm and the temp folder hold no segment or socket of a dead process."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

from cluster.dataplane.segments import SHM_DIR

REPO = Path(__file__).resolve().parents[2]
HOST = socket.gethostname()


class Server:
    def __init__(self, workspace: Path, tmpdir: Path, log: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.log_start = log.stat().st_size if log.exists() else 0
        # its own session: a process group to send Ctrl-C to, as a terminal does
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "comfy_bridge.cli",
                "serve",
                "--workspace",
                str(workspace),
                "--port",
                str(self.port),
                "--executors",
                "2",
                "--executor-threads",
                "1",
                "--state-db",
                "memory",
            ],
            cwd=REPO,
            env={**os.environ, "TMPDIR": str(tmpdir)},
            stdout=open(log, "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.time() + 180
        while True:
            try:
                urllib.request.urlopen(self.base + "/system_stats", timeout=2).read()
                break
            except OSError:
                assert self.proc.poll() is None and time.time() < deadline, self.output()
                time.sleep(0.3)
        self.executors = self._wait_executors(2)

    def _wait_executors(self, n: int) -> list[psutil.Process]:
        deadline = time.time() + 120
        while True:
            found = [c for c in psutil.Process(self.proc.pid).children() if "cluster.executor" in " ".join(c.cmdline())]
            if len(found) == n:
                return found
            assert time.time() < deadline, f"{len(found)} executors: {self.output()}"
            time.sleep(0.2)

    def output(self) -> str:
        return self.log.read_bytes()[self.log_start :].decode(errors="replace")

    def render(self) -> None:
        """One small prompt through the executors, so the head's caller store exists too."""
        prompt = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
        prompt["3"]["inputs"]["steps"] = 1
        req = urllib.request.Request(self.base + "/prompt", data=json.dumps({"prompt": prompt}).encode())
        prompt_id = json.loads(urllib.request.urlopen(req, timeout=30).read())["prompt_id"]
        deadline = time.time() + 180
        while True:
            history = json.loads(urllib.request.urlopen(f"{self.base}/history/{prompt_id}", timeout=30).read())
            if prompt_id in history:
                assert history[prompt_id]["status"]["status_str"] == "success", history[prompt_id]["status"]
                return
            assert time.time() < deadline, self.output()
            time.sleep(0.2)

    @property
    def pids(self) -> list[int]:
        return [self.proc.pid] + [e.pid for e in self.executors]

    def wait_gone(self) -> None:
        self.proc.wait(60)
        _, alive = psutil.wait_procs(self.executors, timeout=60)
        assert not alive, f"executors {alive} outlived the head"


def leftovers(pids: list[int], tmpdir: Path) -> list[str]:
    """Names of segments and head sockets that carry one of `pids`."""
    owned = re.compile(rf"^cc-(c|head-|{re.escape(HOST)}-)({'|'.join(map(str, pids))})-")
    return sorted(n for folder in (SHM_DIR, str(tmpdir)) for n in os.listdir(folder) if owned.match(n))


def _until(condition, what: str, timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    while not condition():
        assert time.time() < deadline, what
        time.sleep(0.1)


def test_serve_leaves_nothing_behind_on_any_exit(demo_workspace, tmp_path):
    tmpdir, log = tmp_path / "tmp", tmp_path / "server.log"
    tmpdir.mkdir()

    # SIGTERM, as a service manager stops it
    server = Server(demo_workspace.root, tmpdir, log)
    server.render()
    assert leftovers(server.pids, tmpdir)
    server.proc.send_signal(signal.SIGTERM)
    server.wait_gone()
    assert leftovers(server.pids, tmpdir) == []
    assert "Traceback" not in server.output()

    # Ctrl-C: SIGINT to the head and its executors at once
    server = Server(demo_workspace.root, tmpdir, log)
    server.render()
    os.killpg(server.proc.pid, signal.SIGINT)
    server.wait_gone()
    assert leftovers(server.pids, tmpdir) == []
    assert "Traceback" not in server.output() and "KeyboardInterrupt" not in server.output()

    # SIGKILL of an executor: the supervisor removes its segments as soon as it sees it die
    server = Server(demo_workspace.root, tmpdir, log)
    server.render()
    victim = server.executors[0]
    victim.kill()
    victim.wait(30)
    # sooner than the head would miss its heartbeats (lost_after_s = 3)
    _until(lambda: leftovers([victim.pid], tmpdir) == [], f"segments of executor {victim.pid} stay", timeout=2.5)
    server.executors = server._wait_executors(2)  # with its replacement

    # SIGKILL of the head: its segments and socket stay until the next start reclaims them
    dead = server.pids + [victim.pid]
    server.proc.kill()
    server.wait_gone()
    assert leftovers(dead, tmpdir)
    server = Server(demo_workspace.root, tmpdir, log)
    assert leftovers(dead, tmpdir) == []
    server.proc.send_signal(signal.SIGTERM)
    server.wait_gone()
    assert leftovers(server.pids, tmpdir) == []
