"""Per-model scaling: how many executors should keep each model's weights warm, from measured demand.

Demand is the executor-seconds a model's invocations took over a sliding window (the measured times
the head already receives), divided by the window: 2.5 means two and a half executors' worth of
work. A model's target is enough replicas to run that at `target_utilisation`, at least one while
it has any recent demand, and zero once it has none: a cold model holds no claim, so executors
let it be evicted (their layer caches evict least recently used models first anyway). Placement
uses the targets to scale out a hot model onto more executors and to avoid loading a model where it
would push out the last warm copies of a hotter one, instead of replicating whole workflows.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol


class Holder(Protocol):
    id: str
    cached_models: set[str]


class ScalingController:
    def __init__(
        self, window_s: float = 30.0, target_utilisation: float = 0.7, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not 0 < target_utilisation <= 1:
            raise ValueError("target_utilisation must be in (0, 1]")
        self.window_s, self.target_utilisation, self.clock = window_s, target_utilisation, clock
        self._samples: dict[str, collections.deque[tuple[float, float]]] = {}  # model -> (time, seconds)
        self._busy: dict[str, float] = collections.defaultdict(float)  # sum over the window
        self.floors: dict[str, int] = {}  # model -> replicas (set_floor)

    def set_floor(self, model_key: str, replicas: int) -> None:
        """Want at least `replicas` warm copies of `model_key` whatever its measured demand (0: no floor):
        an allocation planned ahead of demand, as a cascade controller's executors per stage."""
        if replicas > 0:
            self.floors[model_key] = int(replicas)
        else:
            self.floors.pop(model_key, None)

    def observe(self, model_key: str, seconds: float) -> None:
        """An invocation of `model_key` took `seconds` of executor time."""
        if not model_key:
            return
        self._samples.setdefault(model_key, collections.deque()).append((self.clock(), seconds))
        self._busy[model_key] += seconds

    def _expire(self) -> None:
        horizon = self.clock() - self.window_s
        for key in list(self._samples):
            q = self._samples[key]
            while q and q[0][0] < horizon:
                self._busy[key] -= q.popleft()[1]
            if not q:
                del self._samples[key], self._busy[key]

    def demand(self) -> dict[str, float]:
        """Executors' worth of work per model over the window."""
        self._expire()
        return {k: max(0.0, busy) / self.window_s for k, busy in self._busy.items()}

    def targets(self, executors: int) -> dict[str, int]:
        """Warm replicas wanted per model (models absent: zero), each at least its floor and capped at
        `executors`."""
        wanted = {k: max(1, math.ceil(d / self.target_utilisation - 1e-9)) for k, d in self.demand().items()}
        for k, floor in self.floors.items():
            wanted[k] = max(wanted.get(k, 0), floor)
        return {k: min(executors, n) for k, n in wanted.items()}

    def report(self, holders: Sequence[Holder]) -> dict[str, dict[str, float]]:
        """Per model with demand or replicas: demand, target and current replicas (for stats)."""
        targets = self.targets(len(holders))
        demand = self.demand()
        replicas = collections.Counter(k for h in holders for k in h.cached_models)
        return {
            k: {"demand": round(demand.get(k, 0.0), 4), "target": targets.get(k, 0), "replicas": replicas[k]}
            for k in sorted(set(targets) | set(replicas))
        }


def displacement(executor: Holder, model_key: str, targets: dict[str, int], replicas: dict[str, int]) -> int:
    """How many wanted warm copies loading `model_key` onto `executor` could push out: the models it
    holds that have no more replicas than their target (0 when it already holds `model_key`)."""
    if model_key in executor.cached_models:
        return 0
    return sum(1 for k in executor.cached_models if k != model_key and replicas.get(k, 0) <= targets.get(k, 0))


def replica_counts(executors: Iterable[Holder]) -> dict[str, int]:
    return collections.Counter(k for e in executors for k in e.cached_models)
