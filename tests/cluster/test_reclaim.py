"""Start-up reclaim: segments, head sockets and spill folders of dead processes go; everything else stays."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from cluster.executor.reclaim import owner_pid, reclaim_dead


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_only_the_leftovers_of_dead_owners_are_removed(tmp_path):
    shm, tmp, weights = tmp_path / "shm", tmp_path / "tmp", tmp_path / "weights"
    for d in (shm, tmp, weights):
        d.mkdir()
    host = socket.gethostname()
    dead = _dead_pid()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.05)
        gone = [
            shm / f"cc-c{dead}-abc123-arena",
            shm / f"cc-c{dead}-abc123-refs",
            shm / f"cc-{host}-{dead}-0f0f0f-arena",
            shm / f"cc-{host}-{dead}-0f0f0f-spill3",
            tmp / f"cc-head-{dead}-0123abcd.sock",
            weights / f"cc-{host}-{dead}-0f0f0f",
        ]
        kept = [
            shm / f"cc-c{live.pid}-abc123-arena",
            tmp / f"cc-head-{live.pid}-0123abcd.sock",
            shm / f"cc-otherhost-{dead}-0f0f0f-arena",  # another host's: its pids are not ours to check
            shm / f"cc-test-{dead}-x",
            shm / "unrelated",
            tmp / f"cc-head-{dead}.sock",
        ]
        for path in gone[:-1] + kept:
            path.write_bytes(b"x")
        gone[-1].mkdir()
        (gone[-1] / "model.safetensors").write_bytes(b"x")
        # a live pid whose process started after the file was written is a reused pid: its owner is gone
        reused = shm / f"cc-c{live.pid}-fedcba-arena"
        reused.write_bytes(b"x")
        os.utime(reused, (time.time() - 3600, time.time() - 3600))
        gone.append(reused)

        removed = reclaim_dead(shm_dir=str(shm), temp_dir=str(tmp), weights_dir=weights)

        assert sorted(removed) == sorted(map(str, gone))
        assert not any(p.exists() for p in gone)
        assert all(p.exists() for p in kept)
        # restricted to some pids, others' leftovers stay
        (shm / f"cc-c{dead}-abc123-arena").write_bytes(b"x")
        assert reclaim_dead([live.pid], shm_dir=str(shm), temp_dir=str(tmp), weights_dir=weights) == []
    finally:
        live.kill()
        live.wait()


def test_owner_pid_parses_our_names_only():
    host = socket.gethostname()
    assert owner_pid("cc-c42-a1b2c3-arena") == 42
    assert owner_pid(f"cc-{host}-42-a1b2c3-refs") == 42
    assert owner_pid(f"cc-{host}-42-a1b2c3") == 42
    assert owner_pid("cc-head-42-0123abcd.sock") == 42
    assert owner_pid("cc-c42-nothex-arena") is None
    assert owner_pid("cc-elsewhere-42-a1b2c3-arena") is None
    assert owner_pid("tmp-c42-a1b2c3-arena") is None
