"""A head with two real executor processes: ModelFn results, failures, deadlines, SIGKILL re-runs,
and a head that shrugs off garbage from the network."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import msgspec
import pytest
import torch
import zmq

from cluster import messages as m
from cluster.control.errors import DeadlineExceeded, ExecutorLost, ModelFnError
from cluster.executor.local_cluster import start_local_cluster
from cluster.local import LocalRuntime
from tests.cluster.cluster_fns import tiny_ref

FNS = "tests.cluster.cluster_fns"


@pytest.fixture(scope="module")
def cluster():
    head, rt = start_local_cluster(
        2, threads_per_executor=1, preload=[FNS], heartbeat_s=0.2, lost_after_s=5.0, deadline_s=60.0
    )
    yield head, rt
    head.stop()


def expected(x: torch.Tensor, seed: int, scale: float) -> torch.Tensor:
    torch.set_num_threads(1)
    return LocalRuntime().run("cc_test_linear", tiny_ref(seed), {"x": x}, {"scale": scale})["y"]


def wait_until(pred, timeout: float = 30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError("condition not reached")


async def test_results_match_in_process_run_bit_for_bit(cluster, fixed_threads):
    head, rt = cluster
    x = torch.randn(3, 16, generator=torch.Generator().manual_seed(0))
    out = await rt.call("cc_test_linear", tiny_ref(7), {"x": x}, {"scale": 0.5})
    assert torch.equal(out["y"], expected(x, 7, 0.5))
    assert out["nothing"] is None


async def test_parallel_calls_use_both_executors_and_charge_the_tenant(cluster):
    head, rt = cluster
    before = {e["id"]: e["completed"] for e in head.stats()["executors"]}
    mine = rt.bind("tenant-par", "req-par")
    x = torch.ones(1, 16)
    await asyncio.gather(*[mine.call("cc_test_linear", tiny_ref(1), {"x": x}, {"sleep": 0.3}) for _ in range(4)])
    stats = head.stats()
    after = {e["id"]: e["completed"] for e in stats["executors"]}
    assert all(after[i] > before.get(i, 0) for i in after)
    tenant = stats["tenants"]["tenant-par"]
    assert tenant["vtime"] > 0 and tenant["queued"] == 0 and tenant["running"] == 0
    assert stats["decisions_total"] >= 4


async def test_raising_modelfn_reports_the_exception_text(cluster):
    head, rt = cluster
    with pytest.raises(ModelFnError, match=r"ValueError: bad input of shape \(2, 5\)") as info:
        await rt.bind("t", "req-raise").call("cc_test_raise", None, {"x": torch.zeros(2, 5)}, {})
    assert "Traceback" in info.value.remote_traceback


async def test_hung_modelfn_fails_past_deadline_and_cluster_recovers(cluster):
    head, rt = cluster
    hung = rt.bind("t", "req-hang")
    hung.deadline_s = 1.0
    t0 = time.monotonic()
    with pytest.raises(DeadlineExceeded, match="deadline of 1s"):
        await hung.call("cc_test_hang", None, {}, {})
    assert time.monotonic() - t0 < 10
    # the aborted executor exits and is replaced; work still runs
    wait_until(lambda: len(head.stats()["executors"]) == 2 and head.stats()["deadline_exceeded"] >= 1)
    x = torch.ones(2, 16)
    out = await rt.call("cc_test_linear", tiny_ref(2), {"x": x}, {})
    assert out["y"].shape == (2, 16)


async def test_an_invocation_longer_than_the_loss_timeout_keeps_its_executor(cluster, fixed_threads):
    """The executor runs ModelFns on its socket thread; its watchdog must keep the heartbeats going."""
    head, rt = cluster
    # two executors up, none still leaving after an abort by an earlier test
    wait_until(lambda: [e["draining"] for e in head.stats()["executors"]] == [False, False])
    lost, reruns = head.stats().get("executors_lost", 0), head.stats().get("reruns", 0)
    x = torch.randn(1, 16, generator=torch.Generator().manual_seed(9))
    call = asyncio.ensure_future(
        rt.bind("t-long", "req-long").call("cc_test_linear", tiny_ref(9), {"x": x}, {"sleep": 2 * head.lost_after_s})
    )
    # a live executor of this host is kept through a longer silence too: the heartbeats themselves are watched
    longest_silence, watched = 0.0, 0
    while not call.done():
        silences = [e["last_seen_s"] for e in head.stats()["executors"] if e["inflight"]]
        longest_silence, watched = max([longest_silence, *silences]), watched + len(silences)
        await asyncio.sleep(0.05)
    assert torch.equal(call.result()["y"], expected(x, 9, 1.0))
    assert watched > 10, "the call was not seen running"
    assert longest_silence < head.lost_after_s / 2, f"the running executor was silent for {longest_silence} s"
    stats = head.stats()
    assert stats.get("executors_lost", 0) == lost and stats.get("reruns", 0) == reruns


async def test_sigkill_mid_request_reruns_on_survivor_with_same_result(cluster, fixed_threads):
    head, rt = cluster
    wait_until(lambda: len(head.stats()["executors"]) == 2)
    reruns = head.stats().get("reruns", 0)
    x = torch.randn(5, 16, generator=torch.Generator().manual_seed(3))
    call = asyncio.ensure_future(
        rt.bind("t", "req-kill").call("cc_test_linear", tiny_ref(4), {"x": x}, {"sleep": 2.0, "scale": 3.0})
    )

    def running_pid():
        for e in head.stats()["executors"]:
            if e["running"]:
                return e["pid"]

    pid = await asyncio.to_thread(wait_until, running_pid)
    os.kill(pid, signal.SIGKILL)
    out = await asyncio.wait_for(call, 30)
    assert torch.equal(out["y"], expected(x, 4, 3.0))
    stats = head.stats()
    assert stats["reruns"] == reruns + 1
    assert pid not in [e["pid"] for e in stats["executors"]]


async def test_a_crashed_executor_is_reported_with_its_signal_and_stderr(cluster):
    """A segfault is named as such, with the fault handler's traceback, not as a missing heartbeat."""
    head, rt = cluster
    wait_until(lambda: len(head.stats()["executors"]) == 2)
    with pytest.raises(ExecutorLost) as err:
        await asyncio.wait_for(rt.bind("t", "req-crash").call("cc_test_crash", None, {"x": torch.zeros(2)}, {}), 60)
    message = str(err.value)
    assert "lost its executor 3 times" in message
    assert "killed by signal 11 (SIGSEGV" in message and "no heartbeat" not in message
    assert "Fatal Python error: Segmentation fault" in message and "cluster_fns.py" in message
    wait_until(lambda: len(head.stats()["executors"]) == 2)  # the supervisor replaced every one


async def test_garbage_from_the_network_is_dropped(cluster):
    head, rt = cluster
    bad_before = head.stats().get("bad_messages", 0)
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 2000)  # deliver before close
    sock.connect(head.address)
    valid = m.encode(m.Register("intruder", "h", 1, "cpu", 1, 1, 0, [], "cc-intruder-"))
    for frames in (
        [b"\x00garbage"],
        [valid[: len(valid) // 2]],
        [b"a", b"b"],
        [msgspec.msgpack.encode({"type": "Done", "dispatch_id": "x"})],
    ):
        sock.send_multipart(frames)
    sock.close()
    wait_until(lambda: head.stats().get("bad_messages", 0) >= bad_before + 4)
    out = await rt.call("cc_test_linear", tiny_ref(0), {"x": torch.ones(1, 16)}, {})
    assert out["y"].shape == (1, 16)
    assert len(head.stats()["executors"]) == 2


def test_executors_start_on_their_devices_in_turn_and_split_their_memory(monkeypatch):
    from types import SimpleNamespace

    from cluster.executor import local_cluster

    started: list[list[str]] = []

    class Process:
        def __init__(self, cmd, **_):
            import io

            started.append(cmd)
            self.pid, self.returncode, self.stderr = 0, None, io.BytesIO()

        def poll(self):
            return None

        def terminate(self):  # stop() tells each executor to end
            pass

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr(local_cluster.subprocess, "Popen", Process)
    head = SimpleNamespace(address="ipc:///nowhere", heartbeat_s=0.5, secret=None)
    cluster = local_cluster.LocalCluster(head, 3, 1, None, (), ["cuda:0", "cuda:1"], restart=False, env=None)
    cluster.stop()

    def flag(cmd: list[str], name: str) -> str:
        return cmd[cmd.index(name) + 1]

    assert [flag(cmd, "--device") for cmd in started] == ["cuda:0", "cuda:1", "cuda:0"]
    # executors sharing a GPU, or the host, split its memory between them
    assert [flag(cmd, "--device-share") for cmd in started] == ["2", "1", "2"]
    assert {flag(cmd, "--host-share") for cmd in started} == {"3"}
    assert all("--memory-budget" not in cmd for cmd in started)  # each takes its device's default
