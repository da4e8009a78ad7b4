"""Executors join a head over TCP only with the cluster secret: the head creates it in its workspace
(mode 0600), `comfy-cluster executor --workspace` reads it there, and an executor without it (or with
another) is refused, with a log line on both sides; a head that cannot prove it knows the secret is
not joined either."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys

import pytest

from cluster import secret as cluster_secret
from cluster.control.head import Head
from tests.cluster.test_local_cluster import wait_until
from tests.conftest import REPO


def test_the_head_creates_the_secret_once_readable_by_its_owner_only(tmp_path, monkeypatch):
    monkeypatch.delenv(cluster_secret.ENV, raising=False)
    assert cluster_secret.read_secret(tmp_path) is None
    made = cluster_secret.ensure_secret(tmp_path)
    path = tmp_path / cluster_secret.FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(made) == 64
    assert cluster_secret.ensure_secret(tmp_path) == made == cluster_secret.read_secret(tmp_path)
    monkeypatch.setenv(cluster_secret.ENV, "from-the-environment")
    assert cluster_secret.read_secret(tmp_path) == b"from-the-environment"


@pytest.fixture
def head():
    h = Head("tcp://127.0.0.1:0", secret=b"the-right-secret", heartbeat_s=0.2).start()
    yield h
    h.stop()


def _executor(address: str, secret: str | None, *extra: str, cli: bool = False) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop(cluster_secret.ENV, None)
    if secret is not None:
        env[cluster_secret.ENV] = secret
    cmd = [sys.executable, "-m", "comfy_bridge.cli", "executor"] if cli else [sys.executable, "-m", "cluster.executor"]
    return subprocess.Popen(
        [*cmd, "--head", address, "--memory-budget", str(256 << 20), *extra],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.parametrize(
    "secret,why,executor_says",
    [
        (None, "presented no cluster secret", "refused this executor"),
        ("a-wrong-secret", "does not match", "could not prove it knows the cluster secret (a different one)"),
    ],
)
def test_an_executor_without_the_secret_is_refused(head, secret, why, executor_says, caplog):
    with caplog.at_level(logging.WARNING, "cluster.head"):
        proc = _executor(head.address, secret)
        out, _ = proc.communicate(timeout=120)
        wait_until(lambda: head.stats()["executors_refused"] == 1)
    assert proc.returncode == 2, out
    assert executor_says in out
    assert not head.executors
    assert any("refused executor" in r.message and why in r.message for r in caplog.records)


def test_an_executor_with_the_workspace_secret_joins_and_the_head_knows_its_host(head, tmp_path):
    (tmp_path / cluster_secret.FILE).write_text("the-right-secret\n")
    proc = _executor(
        head.address, None, "--workspace", str(tmp_path), "--data-plane", "tcp", "--exit-with-head", cli=True
    )
    try:
        head.wait_for_executors(1, timeout=120)
        (ex,) = head.stats()["executors"]
        assert ex["ip"] == "127.0.0.1" and ex["host"] and ex["host_id"]
        assert ex["data_address"].startswith("tcp://127.0.0.1:")
    finally:
        head.stop()  # shuts the executor down (without --exit-with-head it would wait for the head's return)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out


def test_an_executor_does_not_join_a_head_that_cannot_prove_the_secret():
    head = Head("tcp://127.0.0.1:0").start()  # no secret
    try:
        proc = _executor(head.address, "some-secret")
        out, _ = proc.communicate(timeout=120)
    finally:
        head.stop()
    assert proc.returncode == 2 and "could not prove it knows the cluster secret" in out
    assert not head.executors
