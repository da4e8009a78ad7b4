"""Pulls from a producer on another host go over its data socket: the same bytes, reference counts and
generations as through shared memory, received straight into the consumer's arena, and a peer without
the cluster secret gets nothing."""

from __future__ import annotations

import logging

import pytest
import torch

from cluster.dataplane import remote
from cluster.dataplane.refcounts import StaleHandle
from cluster.dataplane.remote import RemoteRefused

SECRET = b"test-cluster-secret"


@pytest.fixture
def hosts(make_store):
    """A producer serving on loopback as if on another host, and a consumer that knows the secret."""
    prod, cons = make_store(8 << 20), make_store(8 << 20)
    prod.host = "elsewhere/0"
    prod.serve("127.0.0.1", SECRET)
    cons.secret = SECRET
    return prod, cons


@pytest.mark.parametrize(
    "shape,dtype",
    [((3, 5, 7), torch.float32), ((1024, 512), torch.bfloat16), ((0, 3), torch.float32), ((257,), torch.int64)],
)
def test_a_pull_from_another_host_gives_the_published_tensor_over_tcp(hosts, shape, dtype):
    prod, cons = hosts
    src = (torch.randn(shape) * 10).to(dtype)
    h = prod.publish(src)
    assert h.host == "elsewhere/0" and h.addr == prod.server.address
    with cons.scope() as scope:
        got = scope.fetch(h)
        assert got.dtype == dtype and got.shape == src.shape and torch.equal(got, src)
        assert cons.arena.used_bytes > 0 or not h.nbytes  # received into an arena block, as from shm
    assert (cons.stats.tcp_pulls, cons.stats.shm_pulls, cons.stats.tcp_bytes) == (1, 0, h.nbytes)
    assert cons.arena.used_bytes == 0 and cons.stats.spilled_in == 0
    # the consumer's release reached the producer's table, and the server gave back the reference it
    # held while sending: the block is reclaimed
    assert prod.table.refs(h.slot) == 0 and prod.collect() == 1


def test_reference_counts_and_stale_handles_work_across_hosts(hosts):
    prod, cons = hosts
    h = prod.publish(torch.ones(4), readers=1)
    assert cons.retain(h) == 2 and prod.table.refs(h.slot) == 2
    assert cons.release(h) == 1 and cons.release(h) == 0
    assert prod.collect() == 1
    with pytest.raises(StaleHandle):
        cons.check(h)
    with cons.scope() as scope, pytest.raises(StaleHandle):
        scope.fetch(h)


def test_the_same_host_keeps_shared_memory_unless_tcp_is_forced(make_store, monkeypatch):
    prod, cons = make_store(), make_store()
    prod.serve("127.0.0.1", None)  # serving, but on our host
    with cons.scope() as scope:
        assert torch.equal(scope.fetch(prod.publish(torch.arange(6.0))), torch.arange(6.0))
    assert (cons.stats.shm_pulls, cons.stats.tcp_pulls) == (1, 0)
    monkeypatch.setattr(remote, "_mode", "tcp")
    with cons.scope() as scope:
        assert torch.equal(scope.fetch(prod.publish(torch.arange(6.0))), torch.arange(6.0))
    assert (cons.stats.shm_pulls, cons.stats.tcp_pulls) == (1, 1)


@pytest.mark.parametrize("secret", [None, b"a-wrong-secret"])
def test_a_peer_without_the_cluster_secret_is_refused(hosts, secret, caplog):
    prod, cons = hosts
    cons.secret = secret
    h = prod.publish(torch.ones(8))
    with caplog.at_level(logging.WARNING, "cluster.dataplane"), cons.scope() as scope:
        with pytest.raises(RemoteRefused, match="refused"):
            scope.fetch(h)
    assert prod.server.refused == 1 and prod.table.refs(h.slot) == 1  # nothing read, nothing released
    assert any("refused 127.0.0.1: its cluster secret" in r.message for r in caplog.records)
