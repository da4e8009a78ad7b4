"""One memory budget per executor, shared by active inference, the arena and cached weights.

The arena is fixed at start. Cached weights are elastic: when active inference (or a weight load)
needs room, registered reclaimers (the layer cache) evict until it fits. Active inference never
waits on the budget: if eviction cannot make room it runs over-committed and the excess is counted,
because a stalled executor is worse than a briefly oversubscribed one. On CPU this is accounting
(torch allocates as it likes); on GPU the same numbers size the caches to the device.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

Reclaimer = Callable[[int], int]  # (bytes wanted) -> bytes freed


@dataclass(frozen=True)
class BudgetSnapshot:
    total: int
    arena: int
    weights: int
    active: int
    free: int
    overcommitted: int


class MemoryBudget:
    def __init__(self, total: int, arena: int = 0) -> None:
        if arena > total:
            raise ValueError(f"arena {arena} exceeds the budget {total}")
        self.total, self.arena = total, arena
        self.weights = 0
        self.active = 0
        self.overcommitted = 0  # times active inference or a needed layer ran past the budget
        self._reclaimers: list[Reclaimer] = []
        self._lock = threading.RLock()  # reclaimers call back into release_weights

    @property
    def free(self) -> int:
        return self.total - self.arena - self.weights - self.active

    def add_reclaimer(self, fn: Reclaimer) -> None:
        self._reclaimers.append(fn)

    def make_room(self, nbytes: int, exclude: Reclaimer | None = None) -> bool:
        """Evict cached weights until `nbytes` are free; True when they are."""
        with self._lock:
            for reclaim in self._reclaimers:
                if self.free >= nbytes:
                    break
                if reclaim is not exclude:
                    reclaim(nbytes - self.free)
            return self.free >= nbytes

    def charge_weights(self, nbytes: int, evict: bool = True, force: bool = False) -> bool:
        """Account `nbytes` of cached weights if they fit (after eviction when `evict`); with `force`
        account them anyway (a layer a running model needs) and count an over-commit. True if they fit."""
        with self._lock:
            if self.free < nbytes and not (evict and self.make_room(nbytes)):
                if force:
                    self.weights += nbytes
                    self.overcommitted += 1
                return False
            self.weights += nbytes
            return True

    def release_weights(self, nbytes: int) -> None:
        with self._lock:
            self.weights -= nbytes

    @contextmanager
    def reserve(self, nbytes: int) -> Iterator[bool]:
        """Hold `nbytes` for one invocation's activations; yields False if it had to over-commit."""
        with self._lock:
            fits = self.free >= nbytes or self.make_room(nbytes)
            if not fits:
                self.overcommitted += 1
            self.active += nbytes
        try:
            yield fits
        finally:
            with self._lock:
                self.active -= nbytes

    def snapshot(self) -> BudgetSnapshot:
        with self._lock:
            return BudgetSnapshot(self.total, self.arena, self.weights, self.active, self.free, self.overcommitted)

    @property
    def used(self) -> int:
        return self.total - self.free


class ActivationPeaks:
    """What one ModelFn call's activations are charged in the budget: the inputs' bytes until a call of
    that ModelFn on inputs of that size was measured, then the largest peak measured for it. Charging
    inputs alone lets cached weights fill the device, and the real activations then run out of memory."""

    def __init__(self) -> None:
        self._peaks: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()

    def charge(self, fn: str, input_bytes: int) -> int:
        with self._lock:
            return max(input_bytes, self._peaks.get((fn, input_bytes), 0))

    def record(self, fn: str, input_bytes: int, peak: int) -> None:
        with self._lock:
            key = (fn, input_bytes)
            self._peaks[key] = max(self._peaks.get(key, 0), peak)


class CudaPeakProbe:
    """One call's activation peak on a GPU: the allocator's peak above what was allocated when the call
    began, less the weights the layer cache loaded meanwhile (they are charged as weights)."""

    def __init__(self, device: str, budget: MemoryBudget) -> None:
        import torch

        self._cuda, self.device, self.budget = torch.cuda, torch.device(device), budget
        self._base = self._weights = 0

    def start(self) -> None:
        self._cuda.reset_peak_memory_stats(self.device)
        self._base, self._weights = self._cuda.memory_allocated(self.device), self.budget.weights

    def stop(self) -> int:
        loaded = max(0, self.budget.weights - self._weights)
        return max(0, self._cuda.max_memory_allocated(self.device) - self._base - loaded)
