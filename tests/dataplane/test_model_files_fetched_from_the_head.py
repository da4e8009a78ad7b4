"""An executor on another machine that has no copy of a model file fetches it from the head's data socket:
by digest, in ranges, into its cache (checked, then renamed into place; a second use reads the cache), only
with the cluster secret, and only files the head digested with the content they still have."""

from __future__ import annotations

import os

import pytest

from cluster import refs
from cluster.dataplane import model_files, remote
from cluster.dataplane.segments import SegmentError

SECRET = b"s" * 32


@pytest.fixture
def served(tmp_path, monkeypatch):
    monkeypatch.setenv(model_files.CACHE_ENV, str(tmp_path / "cache"))
    path = tmp_path / "head" / "lora.safetensors"
    path.parent.mkdir()
    path.write_bytes(os.urandom(300_001))
    server = remote.DataServer(None, "127.0.0.1", SECRET)
    yield server, path, refs.file_digest(path)  # digested by the head, so served
    server.close()


def test_a_file_is_fetched_in_ranges_and_then_read_from_the_cache(served, tmp_path):
    server, path, digest = served
    dest = tmp_path / "copy.safetensors"
    remote.RemotePeers(SECRET).fetch_file(server.address, digest, str(dest), chunk=65_536)
    assert dest.read_bytes() == path.read_bytes() and not list(tmp_path.glob("*.part"))
    fetch = model_files.ModelFileFetcher(server.address, SECRET)
    local = fetch(str(path), digest)
    assert local.startswith(str(tmp_path / "cache")) and open(local, "rb").read() == path.read_bytes()
    server.close()  # the cached copy needs no server
    assert fetch(str(path), digest) == local


def test_only_the_clusters_executors_get_only_the_heads_files(served, tmp_path):
    server, path, digest = served
    with pytest.raises(remote.RemoteRefused):
        remote.RemotePeers(b"x" * 32).fetch_file(server.address, digest, str(tmp_path / "a"))
    with pytest.raises(SegmentError, match="no model file with BLAKE3"):
        remote.RemotePeers(SECRET).fetch_file(server.address, "0" * 64, str(tmp_path / "b"))
    path.write_bytes(b"changed since the head digested it")
    with pytest.raises(SegmentError, match="no model file with BLAKE3"):
        remote.RemotePeers(SECRET).fetch_file(server.address, digest, str(tmp_path / "c"))
    open_server = remote.DataServer(None, "127.0.0.1", None)
    try:
        with pytest.raises(SegmentError, match="only where the cluster has a secret"):
            remote.RemotePeers(None).fetch_file(open_server.address, digest, str(tmp_path / "d"))
    finally:
        open_server.close()
    assert not any(p.exists() for p in (tmp_path / "a", tmp_path / "b", tmp_path / "c", tmp_path / "d"))
