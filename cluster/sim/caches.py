"""Modelled GPU weight caches, one per simulated executor: what is resident, and what a run loads.

- `LayerLRU` is Comfy Cluster's layer cache (cluster/weights/cache.py) as bookkeeping: layers of
  least recently used models are evicted first, each model's layers in reverse order, so first
  layers stay and hide loading (prefix loading, Eq. 1).
- `ModelLRU` is the MCache baseline: whole models cached in idle memory, evicted LRU.
- `WorkflowLRU` is the WCache baseline: whole workflows cached (one GPU function each, so models
  are never shared between two cached workflows), evicted LRU.
NoCache keeps nothing between requests and needs no class.
"""

from __future__ import annotations

import math
from collections import OrderedDict

from cluster.sim.gpu_profiles import ModelProfile


class CacheFull(RuntimeError):
    pass


def _bytes(p: ModelProfile, layers: int) -> int:
    return p.nbytes * layers // p.layers


class LayerLRU:
    def __init__(self, capacity: int, profiles: dict[str, ModelProfile]) -> None:
        self.capacity = capacity
        self.profiles = profiles
        self.resident: OrderedDict[str, int] = OrderedDict()  # model -> resident layers, LRU first
        self.used = 0
        self.evicted_layers = 0

    def layers(self, model: str) -> int:
        return self.resident.get(model, 0)

    def acquire(self, model: str) -> int:
        """Make `model` fully resident (it is about to run); returns the layers resident before."""
        p = self.profiles[model]
        before = self.resident.get(model, 0)
        need = p.nbytes - _bytes(p, before)
        self._make_room(need, keep=model)
        self.resident[model] = p.layers
        self.resident.move_to_end(model)
        self.used += need
        return before

    def preload(self, model: str, layers: int) -> int:
        """Bring `model`'s first `layers` layers in while memory is free, never evicting: they join as the
        least recently used, so the next load takes them first. Returns the bytes added."""
        p = self.profiles[model]
        have = self.resident.get(model, 0)
        fit = have
        while fit < min(layers, p.layers) and _bytes(p, fit + 1) - _bytes(p, have) <= self.capacity - self.used:
            fit += 1
        added = _bytes(p, fit) - _bytes(p, have)
        if fit > have:
            self.resident[model] = fit
            if have == 0:
                self.resident.move_to_end(model, last=False)
            self.used += added
        return added

    def _make_room(self, need: int, keep: str) -> None:
        for victim in list(self.resident):
            if self.capacity - self.used >= need:
                return
            if victim == keep:
                continue
            p = self.profiles[victim]
            have = self.resident[victim]
            deficit = need - (self.capacity - self.used)
            drop = min(have, math.ceil(deficit * p.layers / p.nbytes))
            while drop < have and _bytes(p, have) - _bytes(p, have - drop) < deficit:
                drop += 1  # integer rounding of layer sizes
            # reverse layer order: the last `drop` layers go, the first ones stay
            self.used -= _bytes(p, have) - _bytes(p, have - drop)
            self.evicted_layers += drop
            if have == drop:
                del self.resident[victim]
            else:
                self.resident[victim] = have - drop
        if self.capacity - self.used < need:
            raise CacheFull(f"{keep} needs {need} bytes; capacity {self.capacity}")


class ModelLRU:
    def __init__(self, capacity: int, profiles: dict[str, ModelProfile]) -> None:
        self.capacity = capacity
        self.profiles = profiles
        self.resident: OrderedDict[str, None] = OrderedDict()
        self.used = 0

    def acquire(self, models: list[str]) -> list[str]:
        """Make all `models` resident; returns the ones that had to be loaded."""
        missing = [m for m in models if m not in self.resident]
        need = sum(self.profiles[m].nbytes for m in missing)
        for victim in list(self.resident):
            if self.capacity - self.used >= need:
                break
            if victim not in models:
                del self.resident[victim]
                self.used -= self.profiles[victim].nbytes
        if self.capacity - self.used < need:
            raise CacheFull(f"workflow of {models} does not fit")
        for m in models:
            self.resident[m] = None
            self.resident.move_to_end(m)
        self.used += need
        return missing

    def cached_bytes(self, models: list[str]) -> int:
        return sum(self.profiles[m].nbytes for m in models if m in self.resident)


class WorkflowLRU:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.resident: OrderedDict[str, int] = OrderedDict()  # workflow -> bytes
        self.used = 0

    def acquire(self, workflow: str, nbytes: int) -> bool:
        """Make `workflow` resident; True on a hit."""
        if workflow in self.resident:
            self.resident.move_to_end(workflow)
            return True
        for victim in list(self.resident):
            if self.capacity - self.used >= nbytes:
                break
            self.used -= self.resident.pop(victim)
        if self.capacity - self.used < nbytes:
            raise CacheFull(f"workflow {workflow} needs {nbytes} bytes")
        self.resident[workflow] = nbytes
        self.used += nbytes
        return False

    def release(self, workflow: str) -> int:
        """Drop `workflow` (its function instance ended); returns the bytes freed."""
        nbytes = self.resident.pop(workflow, 0)
        self.used -= nbytes
        return nbytes
