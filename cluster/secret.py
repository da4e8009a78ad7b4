"""The cluster secret: what an executor (and a data-plane peer) must know to join a head.

`COMFY_CLUSTER_SECRET` in the environment, else the file `cluster.secret` in the workspace, which the
head creates on its first start (random, readable by its owner only). Nothing secret travels: the
head and the executor each prove they know it with an HMAC over fresh nonces (cluster.control.head /
cluster.executor.process), and every data-plane request carries an HMAC of itself (cluster.dataplane.remote).
Traffic is authenticated, not encrypted: run it on a network you trust, or inside a VPN.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

ENV = "COMFY_CLUSTER_SECRET"
FILE = "cluster.secret"


def read_secret(workspace: str | Path | None = None) -> bytes | None:
    """The secret from the environment, else from `workspace`'s file; None when neither has one."""
    value = os.environ.get(ENV, "").strip()
    if value:
        return value.encode()
    if workspace is None:
        return None
    try:
        value = (Path(workspace) / FILE).read_text().strip()
    except FileNotFoundError:
        return None
    return value.encode() or None


def ensure_secret(workspace: str | Path) -> bytes:
    """The secret (environment, else the workspace's file), creating the file with mode 0600 if absent."""
    found = read_secret(workspace)
    if found is not None:
        return found
    path = Path(workspace) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_hex(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another head created it meanwhile: use theirs
        return read_secret(workspace) or value.encode()
    with os.fdopen(fd, "w") as f:
        f.write(value + "\n")
    return value.encode()


def proof(secret: bytes, *parts: bytes) -> bytes:
    """HMAC-SHA256 of the parts (length-prefixed, so no two part lists give the same message)."""
    mac = hmac.new(secret, digestmod=hashlib.sha256)
    for part in parts:
        mac.update(len(part).to_bytes(4, "big"))
        mac.update(part)
    return mac.digest()


def verify(secret: bytes, mac: bytes, *parts: bytes) -> bool:
    return hmac.compare_digest(mac, proof(secret, *parts))
