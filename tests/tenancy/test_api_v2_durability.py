"""A head SIGKILLed while an API v2 job runs: after the restart GET /api/v2/jobs/{id} still answers, the
job runs again and succeeds with its output, its idempotency key still refuses a second job, and an
asset uploaded before the kill is still served."""

from __future__ import annotations

import os
import signal
import time

import requests
from test_durability import _start, _tenants_with_keys

from tests.conftest import free_port


def _wait(predicate, timeout: float = 60.0, what: str = ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(what)


def test_sigkill_mid_job_keeps_the_job_and_its_key(tmp_path):
    workspace, db, log = tmp_path / "ws", tmp_path / "state.sqlite3", tmp_path / "server.log"
    auth = _tenants_with_keys(db, ["alice"])["alice"]
    port = free_port()
    base = f"http://127.0.0.1:{port}/api/v2"
    workflow = {
        "1": {"class_type": "TNumber", "inputs": {"value": 77}},
        "2": {"class_type": "TSaveThenWait", "inputs": {"value": ["1", 0], "prefix": "kept", "seconds": 3.0}},
    }
    proc = _start(workspace, db, port, log)
    try:
        asset = requests.post(
            f"{base}/assets",
            headers=auth,
            timeout=10,
            files={"file": ("a.txt", b"kept bytes")},
            data={"file_path": "a.txt", "content_type": "text/plain"},
        ).json()
        r = requests.post(
            f"{base}/jobs", json={"workflow": workflow}, headers={**auth, "Idempotency-Key": "once"}, timeout=10
        )
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]
        _wait(
            lambda: requests.get(f"{base}/jobs/{job_id}", headers=auth, timeout=10).json()["status"] == "running",
            what="running",
        )
        # The node wrote its image, then waits: the head dies mid-job.
        _wait(lambda: (workspace / "runs.log").is_file(), what="the node ran")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()

    proc = _start(workspace, db, port, log)
    try:
        r = requests.get(f"{base}/jobs/{job_id}", headers=auth, timeout=10)
        assert r.status_code == 200 and r.json()["status"] in ("queued", "running"), r.text
        job = _wait(
            lambda: (
                (j := requests.get(f"{base}/jobs/{job_id}", headers=auth, timeout=10).json())["status"]
                in ("succeeded", "failed")
                and j
            ),
            timeout=60,
            what="finished",
        )
        assert job["status"] == "succeeded", job
        assert [o["name"] for o in job["outputs"]] == ["kept_77_00001_.png"]
        content = requests.get(job["outputs"][0]["url"], headers=auth, timeout=10)
        assert content.status_code == 200 and content.content[:4] == b"\x89PNG"
        assert (workspace / "runs.log").read_text().split() == ["kept_77", "kept_77"]  # it ran again, once
        again = requests.post(
            f"{base}/jobs", json={"workflow": workflow}, headers={**auth, "Idempotency-Key": "once"}, timeout=10
        )
        assert again.status_code == 422 and again.json()["error"]["code"] == "idempotency_key_reuse"
        assert [j["id"] for j in requests.get(f"{base}/jobs", headers=auth, timeout=10).json()["jobs"]] == [job_id]
        kept = requests.get(f"{base}/assets/{asset['id']}/content", headers=auth, timeout=10)
        assert kept.status_code == 200 and kept.content == b"kept bytes"
    finally:
        proc.terminate()
        proc.wait(10)
