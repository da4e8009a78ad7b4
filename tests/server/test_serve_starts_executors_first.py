"""`serve` starts its executor processes first thing, before its own process imports torch and the server
(seconds the executors spend importing theirs), for a head whose address is fixed before it exists; the
head then takes them over once it listens there. The server listens meanwhile; executors that never
register stop it as a failed start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from types import SimpleNamespace

import pytest

from cluster.executor.local_cluster import HeadContact, LocalCluster

PROBE = """
import json, sys
from comfy_bridge.cli import build_parser
from comfy_bridge.cli.serve import start_executors_early
args = build_parser(["serve"]).parse_args(["serve", "--workspace", sys.argv[1], *sys.argv[2:]])
started = start_executors_early(args)
torch_at_spawn = "torch" in sys.modules
out = {"torch_at_spawn": torch_at_spawn, "started": started is not None}
if started is not None:
    from cluster.executor.local_cluster import start_local_cluster
    head, _ = start_local_cluster(len(started.devices), started.threads, devices=started.devices, started=started)
    try:
        out.update(address_given=[p.args[p.args.index("--head") + 1] for p in started.procs] == [head.address],
                   registered=sorted(e.pid for e in head.executors.values()) == started.pids(),
                   warm_up=all("--warm-up" in p.args for p in started.procs))
    finally:
        head.stop()
print(json.dumps(out))
"""


def probe(tmp_path, *flags: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path), *flags], capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_executor_starts_before_torch_is_imported_and_joins_the_head_at_the_fixed_address(tmp_path):
    assert probe(tmp_path) == {
        "torch_at_spawn": False,
        "started": True,
        "address_given": True,
        "registered": True,
        "warm_up": True,
    }


@pytest.mark.parametrize(
    "flags", [["--executors", "0"], ["--data-plane", "tcp"], ["--head-address", "tcp://127.0.0.1:0"]]
)
def test_no_early_executors_where_the_cluster_starts_otherwise(tmp_path, flags):
    # in-process, or an environment (data plane) or address (a TCP port) known only later
    assert probe(tmp_path, *flags) == {"torch_at_spawn": False, "started": False}


def test_a_head_at_another_address_cannot_take_them_over(monkeypatch):
    started: list[list[str]] = []

    class Process:
        def __init__(self, cmd, **kw):
            started.append(cmd)
            self.pid, self.returncode, self.stderr, self.args = 0, None, None, cmd

        def poll(self):
            return None

        def terminate(self):  # stop() tells each executor to end
            pass

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr("cluster.executor.local_cluster.subprocess.Popen", Process)
    monkeypatch.setattr("cluster.executor.local_cluster.StderrTail", lambda stream: None)
    cluster = LocalCluster(
        HeadContact("ipc:///tmp/cc-here.sock"), 1, 1, None, (), ["cpu"], restart=False, env=None, supervise=False
    )
    with pytest.raises(ValueError, match="started for ipc:///tmp/cc-here.sock"):
        cluster.attach(SimpleNamespace(address="ipc:///tmp/cc-elsewhere.sock"))
    cluster.stop()
    assert started[0][started[0].index("--head") + 1] == "ipc:///tmp/cc-here.sock"


@pytest.mark.parametrize("registered, running, stops", [(0, True, True), (1, True, False), (0, False, False)])
def test_serve_listens_meanwhile_and_stops_as_a_failed_start_if_they_never_register(
    monkeypatch, registered, running, stops
):
    # a head stopped meanwhile (the server stopping) ends the watch without a signal
    from cluster.control.head import Head
    from comfy_bridge.cli import serve

    monkeypatch.setattr(serve, "EXECUTOR_START_S", 0.3)
    signals: list[tuple[int, int]] = []
    monkeypatch.setattr(serve.os, "kill", lambda pid, sig: signals.append((pid, sig)))
    head = SimpleNamespace(executors={f"ex{i}": None for i in range(registered)}, running=running)
    head.wait_for_executors = lambda n, timeout: Head.wait_for_executors(head, n, timeout)
    failed = threading.Event()
    serve.stop_unless_registered(head, 1, failed).join(10)
    assert failed.is_set() == stops
    assert signals == ([(os.getpid(), signal.SIGTERM)] if stops else [])


def test_serve_starts_without_the_collector_and_serves_with_it(tmp_path):
    # --executors 0: the model code is imported in the server's process, before it listens
    code = (
        "import gc, json, sys\n"
        "from comfy_bridge.cli import main\n"
        "rc = main(['serve', '--workspace', sys.argv[1], '--executors', '0', '--port', '0',"
        " '--state-db', 'memory', '--quick-test-for-ci'])\n"
        "print(json.dumps([rc, gc.isenabled(), gc.get_freeze_count()]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    rc, enabled, frozen = json.loads(done.stdout.strip().splitlines()[-1])
    assert rc == 0 and enabled and frozen > 100_000
