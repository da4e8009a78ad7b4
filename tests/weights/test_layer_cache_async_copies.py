"""The layer cache with asynchronous copies (a GPU's copier stream), on the CPU: a copier whose copies land
only when it is synchronised or their event is waited on, as the host sees a CUDA stream's."""

from __future__ import annotations

import itertools
import time

import torch

from cluster.dataplane.budget import MemoryBudget
from cluster.weights.cache import LayerCache
from cluster.weights.prefix import profile_model
from cluster.weights.tiers import DiskTier, HostTier, HostToDevice

from .conftest import WIDTH, stack, weights_of

COPY_S = 0.25  # what one layer's copy takes once it runs (well above a small layer's compute)


class LateEvent:
    def __init__(self, copier: LateCopier, key: int) -> None:
        self.copier, self.key = copier, key

    def synchronize(self) -> None:
        self.copier.land(self.key)


class LateCopier(HostToDevice):
    """Copies queued at issue, landing (after COPY_S each) on synchronize or their event's wait."""

    shares_host_memory = False  # it stands for a GPU's copier: layers are copied, never run from host memory

    def __init__(self, events: bool) -> None:
        super().__init__("cpu")
        self.events = events
        self.pending: dict[int, tuple[dict, dict]] = {}
        self.resident_at_landing: list[int] = []  # layers of "m" still resident as each copy landed
        self.allocated = 0
        self._keys = itertools.count()
        self.cache: LayerCache | None = None

    def empty(self, shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
        self.allocated += 1
        return super().empty(shape, dtype)

    def copy(self, src: dict, dst: dict) -> object | None:
        key = next(self._keys)
        self.pending[key] = (src, dst)
        return LateEvent(self, key) if self.events else None

    def land(self, key: int) -> None:
        src, dst = self.pending.pop(key)
        time.sleep(COPY_S)
        for k, t in src.items():
            dst[k].copy_(t)
        self.resident_at_landing.append(len(self.cache.resident("m")))

    def synchronize(self) -> None:
        for key in list(self.pending):
            self.land(key)


def cache_with(copier: LateCopier, tmp_path) -> LayerCache:
    cache = LayerCache(MemoryBudget(1 << 30), HostTier(DiskTier(tmp_path / "disk")), copier)
    copier.cache = cache
    return cache


def test_t_load_is_timed_to_the_copies_landing_so_the_prefix_is_not_zero(tmp_path):
    copier = LateCopier(events=False)
    cache = cache_with(copier, tmp_path)
    ref, w = weights_of(0, layers=4)
    cache.register("m", lambda: stack(4), lambda m: list(m), w)
    x = torch.randn(3, WIDTH)
    prof = profile_model(cache, "m", lambda model: model(x), repeats=2)
    assert prof.t_load >= COPY_S
    assert prof.prefix > 0
    with torch.inference_mode(), cache.use("m") as model:
        assert torch.equal(model(x), ref(x))  # the profile left it resident, the copies landed


def test_a_layer_evicted_mid_copy_is_given_back_only_after_its_copy_landed(tmp_path):
    copier = LateCopier(events=True)
    cache = cache_with(copier, tmp_path)
    _, w = weights_of(1, layers=3)
    cache.register("m", lambda: stack(3), lambda m: list(m), w)
    cache.warm("m")  # three copies issued, none landed
    assert len(copier.pending) == 3 and copier.allocated == 6  # weight and bias per layer, from the copier
    cache.drop("m")  # eviction under pressure, say
    assert copier.pending == {}
    # evicted last layer first, each copy waited for while its layer was still bound (not after)
    assert copier.resident_at_landing == [3, 2, 1]
