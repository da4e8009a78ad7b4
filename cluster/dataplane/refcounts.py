"""Reference counts of published tensors, in a shared segment so consumers release one-sidedly.

One table per executor: slot i holds (generation, refs) as two int64s. The owner takes a free slot
when it publishes (refs = number of readers, generation bumped), any process on the host may
`retain`/`release` it by name, and the owner reclaims the slots whose count reached zero on its
next `collect`. A read checks the generation before and after its copy, so a handle whose tensor
was already freed raises instead of returning someone else's bytes. Updates take a POSIX byte-range
lock on the slot (cross-process) plus a thread lock (record locks are per process, not per thread).
"""

from __future__ import annotations

import fcntl
import os
import threading

import numpy as np

from cluster.dataplane import segments
from cluster.dataplane.segments import SegmentError

_SLOT = 16  # bytes: int64 generation, int64 refs


class StaleHandle(SegmentError):
    """The tensor a handle names was already freed (all its readers released it)."""


class _Table:
    def __init__(self, name: str, mm, fd: int) -> None:
        self.name, self.mm, self.fd = name, mm, fd
        self.cells = np.frombuffer(mm, dtype=np.int64).reshape(-1, 2)
        self.lock = threading.Lock()

    def update(self, slot: int, generation: int, delta: int) -> int:
        if not 0 <= slot < len(self.cells):
            raise SegmentError(f"slot {slot} out of range")
        with self.lock:
            fcntl.lockf(self.fd, fcntl.LOCK_EX, _SLOT, slot * _SLOT)
            try:
                gen, refs = self.cells[slot]
                if gen != generation or refs <= 0:
                    raise StaleHandle(f"{self.name}[{slot}] generation {generation} is no longer live")
                self.cells[slot, 1] = refs + delta
                return int(refs + delta)
            finally:
                fcntl.lockf(self.fd, fcntl.LOCK_UN, _SLOT, slot * _SLOT)


class RefTable:
    """The owner's side: hands out slots and reclaims dead ones."""

    def __init__(self, name: str, slots: int = 4096) -> None:
        self.name = name
        mm = segments.create(name, slots * _SLOT)
        self._t = _Table(name, mm, os.open(segments.path_of(name), os.O_RDWR))
        self._free = list(range(slots - 1, -1, -1))
        self._live: set[int] = set()

    def take(self, refs: int) -> tuple[int, int]:
        """A fresh (slot, generation) with `refs` readers; raises when every slot is live."""
        if refs <= 0:
            raise ValueError("a published tensor needs at least one reader")
        if not self._free:
            raise MemoryError(f"{self.name}: all {len(self._t.cells)} slots are live")
        slot = self._free.pop()
        with self._t.lock:
            gen = int(self._t.cells[slot, 0]) + 1
            self._t.cells[slot] = (gen, refs)
        self._live.add(slot)
        return slot, gen

    def dead(self) -> list[int]:
        """Live slots whose readers have all released; the caller frees their storage, then `recycle`s."""
        return [s for s in self._live if self._t.cells[s, 1] <= 0]

    def recycle(self, slot: int) -> None:
        with self._t.lock:
            self._t.cells[slot, 0] += 1  # readers still holding the old handle now fail the check
            self._t.cells[slot, 1] = 0
        self._live.discard(slot)
        self._free.append(slot)

    def refs(self, slot: int) -> int:
        return int(self._t.cells[slot, 1])

    @property
    def live(self) -> int:
        return len(self._live)

    def close(self) -> None:
        if self._t.fd >= 0:
            os.close(self._t.fd)
            self._t.fd = -1
            segments.unlink(self.name)


class RefClient:
    """Any process's side: retain/release/check slots of any table on the host, by name."""

    def __init__(self) -> None:
        self._tables: dict[str, _Table] = {}
        self._lock = threading.Lock()

    def _table(self, name: str) -> _Table:
        with self._lock:
            t = self._tables.get(name)
            if t is None:
                mm, fd = segments.open_rw(name)
                t = self._tables[name] = _Table(name, mm, fd)
            return t

    def add(self, name: str, slot: int, generation: int, delta: int) -> int:
        """Add `delta` to the count (negative to release); returns the new count."""
        return self._table(name).update(slot, generation, delta)

    def check(self, name: str, slot: int, generation: int) -> None:
        t = self._table(name)
        if not 0 <= slot < len(t.cells) or t.cells[slot, 0] != generation or t.cells[slot, 1] <= 0:
            raise StaleHandle(f"{name}[{slot}] generation {generation} is no longer live")

    def close(self) -> None:
        with self._lock:
            for t in self._tables.values():
                os.close(t.fd)
            self._tables.clear()
