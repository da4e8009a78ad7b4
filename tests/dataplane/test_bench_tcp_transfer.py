"""`bench dataplane`'s cross-host figure measures what it says: the bytes arrive intact, every pull went
over the producer's data socket (none through shared memory), and the baseline moved the same bytes."""

from __future__ import annotations

import pytest

from cluster.bench.dataplane import MiB, bench_file_fetch, bench_tcp_transfer


def test_the_cross_host_pull_is_measured_over_tcp_against_a_raw_socket():
    r = bench_tcp_transfer(4 * MiB, repeats=3)
    assert r["correct"] and r["bytes"] == 4 * MiB  # correct: right bytes, and tcp pulls only
    assert r["pull_GBps"] > 0 and r["raw_socket_GBps"] > 0
    assert r["ratio"] == pytest.approx(r["pull_GBps"] / r["raw_socket_GBps"])


def test_the_model_file_fetch_is_measured_against_a_raw_socket():
    r = bench_file_fetch(4 * MiB, repeats=2)
    assert r["correct"] and r["bytes"] == 4 * MiB  # correct: the fetched file has the served file's digest
    assert r["ratio"] == pytest.approx(r["fetch_GBps"] / r["raw_socket_GBps"])
