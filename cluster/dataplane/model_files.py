"""Model files an executor on another machine has no copy of, fetched once from the head's data socket.

A ModelRef names files by the head's paths. An executor that finds neither that path nor a copy in its own
model folders (cluster.refs.on_this_machine) asks the head's data server for the file by its BLAKE3 (requests
proven with the cluster secret, so only the cluster's executors get them), receives it in 64 MiB ranges
straight into the pages of a file beside its place in the cache, checks the digest and renames it into
place: `$COMFY_CLUSTER_MODEL_CACHE`, else the user's cache folder, keyed by digest. A file uploaded to the
head (a tenant's LoRA) then runs on every machine without copying it by hand.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import platformdirs

from cluster import refs
from cluster.dataplane import remote

log = logging.getLogger("cluster.dataplane")

CACHE_ENV = "COMFY_CLUSTER_MODEL_CACHE"


def cache_dir() -> Path:
    named = os.environ.get(CACHE_ENV)
    return Path(named) if named else Path(platformdirs.user_cache_dir("comfy-cluster", appauthor=False)) / "model-files"


class ModelFileFetcher:
    """(head's path, digest) -> the local copy, fetched from the data server at `addr` unless cached."""

    def __init__(self, addr: str, secret: bytes) -> None:
        self.addr = addr
        self.peers = remote.RemotePeers(secret, timeout_s=120.0)  # a range of 64 MiB on a slow link
        self._lock = threading.Lock()  # one download at a time: a model's threads ask for the same file

    def __call__(self, path: str, digest: str) -> str:
        dest = cache_dir() / digest[:32] / Path(path).name
        with self._lock:
            if dest.is_file() and refs.file_digest(dest) == digest:
                return str(dest)
            dest.parent.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            self.peers.fetch_file(self.addr, digest, str(dest))
            log.info(
                "fetched model file %s (%.1f MB) from the head in %.1f s",
                Path(path).name,
                dest.stat().st_size / 1e6,
                time.perf_counter() - t0,
            )
            return str(dest)
