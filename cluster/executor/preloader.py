"""An executor's preloading (paper §5.1): the first L_e layers of the models the head expects, brought
into idle memory in the background before any invocation of them arrives.

The head decides which models and in which order (cluster.scheduling.dispatcher.preload_order, the simulator's
decision too) and sends them in a `messages.Preload`; each replaces the last. A thread of this module
then walks the list: it builds each model from its files if this executor never has (into the host
tier, nothing resident), and makes its first L_e layers resident one at a time from free memory only
(`LayerCache.preload_layer`: never evicting, and leaving the model's last use as it was, so these
layers are the first a real load evicts). L_e is Eq. 2 (cluster.weights.prefix.prefix_length) with
the copy speed this cache measured and the head's measured compute time of one run; with no compute
time measured yet it is every layer, Eq. 2 with T_comp = 0. It yields to invocations: a run pauses
it, and waits at most for the layer being copied. A device that shares host memory (the CPU without
an emulated copy bandwidth) loads a layer for free, L_e is 0 there, and nothing is preloaded.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from cluster import messages as m
from cluster.call import unpack_model
from cluster.executor.models import ExecutorModels
from cluster.modelfn import ModelFn
from cluster.weights.cache import LayerCache
from cluster.weights.prefix import prefix_length

log = logging.getLogger("cluster.executor")


def prefix_layers(cache: LayerCache, key: str, compute_s: float) -> int:
    """L_e of `key` on this cache: Eq. 2 from its mean layer's copy time at the speed the cache measured
    (0 before any copy was timed) and `compute_s` over its layers."""
    sizes = cache.layer_bytes(key)
    if cache.copier.shares_host_memory or not cache.load_bps:
        return 0
    t_load = sum(sizes) / len(sizes) / cache.load_bps
    return prefix_length(len(sizes), t_load, max(compute_s, 0.0) / len(sizes))


class Preloader:
    def __init__(self, models: ExecutorModels, fn: Callable[[str], ModelFn]) -> None:
        self.models, self.fn = models, fn
        self.cache: LayerCache = models.cache
        self._seen: dict[str, tuple[str, int, int]] = {}  # model key -> (cache key, L_e, layers)
        self._plan: list[m.PreloadModel] = []
        self._version = 0
        self._wake = threading.Condition()
        self._step = threading.Lock()  # held while one layer is copied or a run goes on
        self._runs = 0
        self._stop = False
        self._thread: threading.Thread | None = None

    def want(self, models: list[m.PreloadModel]) -> None:
        """The head's latest list: preload these, in this order (started on the first call)."""
        if self.cache.copier.shares_host_memory:
            return  # loading a layer costs nothing here: there is nothing to hide
        with self._wake:
            self._plan, self._version = list(models), self._version + 1
            self._wake.notify()
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="preloader", daemon=True)
            self._thread.start()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Around a run: preloading stops after the layer being copied, and resumes after."""
        with self._wake:
            self._runs += 1
        with self._step:
            pass
        try:
            yield
        finally:
            with self._wake:
                self._runs -= 1
                self._wake.notify()

    def report(self) -> dict[str, list[int]]:
        """For the heartbeat, per model key preloading took up: [first layers resident now, L_e, layers]."""
        out = {}
        for ref_key, (key, le, n) in list(self._seen.items()):
            if self.cache.has(key):
                out[ref_key] = [self.cache.resident_prefix(key), le, n]
        return out

    def stop(self) -> None:
        with self._wake:
            self._stop = True
            self._wake.notify()

    # the thread ---------------------------------------------------------------------------------------
    def _idle_plan(self) -> tuple[int, list[m.PreloadModel]] | None:
        """Wait until there is a plan and no run; None to stop."""
        with self._wake:
            while not self._stop and (self._runs or not self._plan):
                self._wake.wait()
            return None if self._stop else (self._version, list(self._plan))

    def _loop(self) -> None:
        while True:
            got = self._idle_plan()
            if got is None:
                return
            version, plan = got
            try:
                self._fill(version, plan)
            except Exception:  # a model that fails to build must not end preloading, nor the executor
                log.exception("preloading failed")
            with self._wake:  # done with this plan: sleep until a new one
                while not self._stop and self._version == version:
                    self._wake.wait()

    def _fill(self, version: int, plan: list[m.PreloadModel]) -> None:
        for want in plan:
            ref = unpack_model(want.call)
            if ref is None:
                continue
            key, built_s = self.models.build(self.fn(want.fn), ref)  # reading files: no lock a run needs
            self.models.prebuilt += built_s > 0
            if not self.models.managed(key):
                continue
            n = self.cache.num_layers(key)
            le = self._prefix(key, want.compute_s)
            i = 0
            while i < (n if le is None else le):
                if not self._layer(version, key, i):
                    return  # no free memory left, or a newer plan: stop here
                i += 1
                if le is None:  # the copy speed was measured just now
                    le = self._prefix(key, want.compute_s)
                self._seen[ref.key] = (key, n if le is None else le, n)
            self._seen[ref.key] = (key, n if le is None else le, n)

    def _prefix(self, key: str, compute_s: float) -> int | None:
        """L_e by Eq. 2 once a copy was timed, at least the first layer (every run waits for layer 0,
        which also holds the weights outside the blocks); None before."""
        if not self.cache.load_bps:
            return None
        return max(1, prefix_layers(self.cache, key, compute_s))

    def _layer(self, version: int, key: str, i: int) -> bool:
        """Preload one layer while no run goes on; False when the plan changed or memory is full."""
        while True:
            with self._wake:
                if self._stop or self._version != version:
                    return False
                if self._runs:
                    self._wake.wait()
                    continue
            with self._step:
                if self._runs:
                    continue
                return self.cache.preload_layer(key, i)
