"""Another machine, made of Linux namespaces on this one: its own network (a veth link to this host, its own
IP, nothing else reachable), host name, System V IPC and /dev/shm (a tmpfs of its own, so no shared memory
with this host can be attached). It keeps this machine's files and CPUs, but a folder of this host's can be
hidden from it (`hide`), so that a workspace given to it lives at another path and this host's is absent. Processes run in it through `nsenter`. Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN),
`unshare`, `nsenter` and `ip`; `OtherHost.unavailable()` says why it cannot be made."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

HOLDER = """set -e
mount -t tmpfs -o size=1g tmpfs /dev/shm
hostname "$1"
ip link set lo up
echo ready
exec sleep infinity
"""


class OtherHost:
    def __init__(self, name: str = "cc-other-host") -> None:
        self.name = name
        n = random.randrange(1, 250)
        self.ip, self.peer_ip = f"10.201.{n}.2", f"10.201.{n}.1"  # its address; this host's end of the link
        self.link = f"cch{os.getpid() % 100000}"
        self.holder: subprocess.Popen | None = None
        self.procs: list[subprocess.Popen] = []

    @staticmethod
    def unavailable() -> str | None:
        """Why no other host can be made here (None: it can)."""
        missing = [tool for tool in ("unshare", "nsenter", "ip") if shutil.which(tool) is None]
        if missing:
            return f"{', '.join(missing)} not installed"
        if os.geteuid() != 0:
            return "namespaces and a veth link need root"
        probe = subprocess.run(
            ["unshare", "--net", "--uts", "--ipc", "--mount", "true"], capture_output=True, text=True
        )
        if probe.returncode != 0:
            return f"unshare refused: {probe.stderr.strip()}"
        return None

    def __enter__(self) -> OtherHost:
        self.holder = subprocess.Popen(
            [
                "unshare",
                "--net",
                "--uts",
                "--ipc",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                HOLDER,
                "sh",
                self.name,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        line = self.holder.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"the other host did not start: {line} {self.holder.stdout.read()}")
        pid = str(self.holder.pid)
        run = lambda *cmd: subprocess.run(cmd, check=True, capture_output=True, text=True)  # noqa: E731
        run("ip", "link", "add", self.link, "type", "veth", "peer", "name", "eth0", "netns", pid)
        run("ip", "addr", "add", f"{self.peer_ip}/30", "dev", self.link)
        run("ip", "link", "set", self.link, "up")
        run("nsenter", "-t", pid, "-n", "ip", "addr", "add", f"{self.ip}/30", "dev", "eth0")
        run("nsenter", "-t", pid, "-n", "ip", "link", "set", "eth0", "up")
        return self

    def hide(self, path: Path) -> None:
        """Make `path` (a folder of this host's) absent on the other one: an empty tmpfs is mounted over it there."""
        subprocess.run(
            ["nsenter", "-t", str(self.holder.pid), "-m", "mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)],
            check=True,
            capture_output=True,
            text=True,
        )

    def cut(self) -> None:
        """The link goes down: from now on the other host is unreachable, as a machine whose network failed."""
        subprocess.run(["ip", "link", "set", self.link, "down"], check=True, capture_output=True, text=True)

    def popen(self, argv: list[str], cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
        """Start `argv` on the other host (its output to `log`)."""
        proc = subprocess.Popen(
            ["nsenter", "-t", str(self.holder.pid), "-n", "-u", "-i", "-m", f"--wd={cwd}", "--", *argv],
            env=env,
            stdout=open(log, "w"),
            stderr=subprocess.STDOUT,
        )
        self.procs.append(proc)
        return proc

    def python(self, args: list[str], repo: Path, log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
        """`python ARGS` on the other host with this checkout importable (an editable install may point anywhere)."""
        env = dict(os.environ if env is None else env)
        env["PYTHONPATH"] = os.pathsep.join([str(repo), *filter(None, [env.get("PYTHONPATH")])])
        return self.popen([sys.executable, *args], repo, env, log)

    def __exit__(self, *exc) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.time() + 20
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                proc.kill()
        if self.holder is not None:
            self.holder.kill()  # the last process in its namespaces: the link goes with them
            self.holder.wait(10)
        subprocess.run(["ip", "link", "del", self.link], capture_output=True)
