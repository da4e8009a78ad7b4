"""Named shared-memory segments (files under /dev/shm) that any process of the host can map.

Owners create them pre-faulted (MAP_POPULATE) so the first copy does not pay page faults; peers
map them read-only once and keep the map (`PeerMaps`), so a pull is one memcpy. Names are checked:
they arrive in metadata from other processes.
"""

from __future__ import annotations

import mmap
import os
import re
import tempfile
import threading

SHM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
_NAME = re.compile(r"^cc-[A-Za-z0-9_.-]{1,200}$")
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)


class SegmentError(RuntimeError):
    """A segment is missing (its owner died or freed it) or metadata does not fit it."""


def path_of(name: str) -> str:
    if not _NAME.match(name) or ".." in name:
        raise SegmentError(f"bad segment name {name!r}")
    return os.path.join(SHM_DIR, name)


def safe_prefix(owner: str) -> str:
    """`cc-<owner>-`: every segment of one executor starts with it, so a lost one is cleaned by prefix."""
    return f"cc-{re.sub(r'[^A-Za-z0-9_.-]', '_', owner)}-"


def create(name: str, size: int) -> mmap.mmap:
    """A new read-write segment of `size` bytes, its pages already mapped."""
    fd = os.open(path_of(name), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, max(size, 1))
        return mmap.mmap(fd, max(size, 1), flags=mmap.MAP_SHARED | _POPULATE)
    finally:
        os.close(fd)


def open_rw(name: str) -> tuple[mmap.mmap, int]:
    """Map an existing segment read-write; also returns an fd for byte-range locks (caller closes)."""
    try:
        fd = os.open(path_of(name), os.O_RDWR)
    except FileNotFoundError:
        raise SegmentError(f"segment {name} is gone (its owner was lost)") from None
    return mmap.mmap(fd, os.fstat(fd).st_size, flags=mmap.MAP_SHARED), fd


def unlink(name: str) -> None:
    try:
        os.unlink(path_of(name))
    except (FileNotFoundError, SegmentError):
        pass


def unlink_prefix(prefix: str) -> int:
    """Remove every segment whose name starts with `prefix` (a lost executor's); returns the count."""
    if not _NAME.match(prefix + "x"):
        raise SegmentError(f"bad prefix {prefix!r}")
    names = [n for n in os.listdir(SHM_DIR) if n.startswith(prefix)]
    for name in names:
        unlink(name)
    return len(names)


class PeerMaps:
    """Read-only maps of other processes' segments, opened once and kept (a pull is then one copy).

    A map is dropped when its file is replaced or removed (a restarted executor reuses its name).
    """

    def __init__(self) -> None:
        self._maps: dict[str, tuple[int, mmap.mmap]] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> mmap.mmap:
        path = path_of(name)
        try:
            ino = os.stat(path).st_ino
        except FileNotFoundError:
            self.drop(name)
            raise SegmentError(f"segment {name} is gone (its owner was lost or freed it)") from None
        with self._lock:
            hit = self._maps.get(name)
            if hit is not None and hit[0] == ino:
                return hit[1]
            fd = os.open(path, os.O_RDONLY)
            try:
                mm = mmap.mmap(fd, os.fstat(fd).st_size, flags=mmap.MAP_SHARED | _POPULATE, prot=mmap.PROT_READ)
            finally:
                os.close(fd)
            self._maps[name] = (ino, mm)
            return mm

    def drop(self, name: str) -> None:
        with self._lock:
            self._maps.pop(name, None)  # closed when the last tensor view of it goes

    def drop_prefix(self, prefix: str) -> None:
        """Forget every map whose segment name starts with `prefix` (a lost owner's segments)."""
        with self._lock:
            for name in [n for n in self._maps if n.startswith(prefix)]:
                del self._maps[name]

    def close(self) -> None:
        with self._lock:
            self._maps.clear()
