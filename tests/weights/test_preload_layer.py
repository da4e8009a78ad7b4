"""Preloading into the layer cache (cluster.executor.preloader's step): free memory only, never evicting, timed,
and the first thing a real load evicts."""

from __future__ import annotations

import torch

from .conftest import LAYER_BYTES, stack, weights_of


@torch.inference_mode()
def test_preloaded_layers_take_free_memory_only_and_are_evicted_first(make_cache):
    cache = make_cache(budget_bytes=6 * LAYER_BYTES, bandwidth=1e9)  # a copy per layer, timed
    for key, seed in (("used", 0), ("expected", 1), ("next", 2)):
        cache.register(key, lambda: stack(4), lambda m: list(m), weights_of(seed)[1])
    with cache.use("used"):
        pass  # 4 layers resident, 2 free
    assert cache.load_bps is None
    assert [cache.preload_layer("expected", i) for i in range(4)] == [True, True, False, False]
    assert cache.resident("expected") == [0, 1] and cache.resident("used") == [0, 1, 2, 3]  # nothing evicted
    assert cache.resident_prefix("expected") == 2 and cache.load_bps > 0
    ref, _ = weights_of(2)
    with cache.use("next") as model:  # a real load: needs 4 layers, 0 free
        assert torch.equal(model(torch.ones(1, 64)), ref(torch.ones(1, 64)))
    # the preloaded model went first (nobody used it), last layer first; then the used one
    assert cache.evictions[:2] == [("expected", 1), ("expected", 0)]
    assert cache.streamed == 8  # the two runs' layers, not the preloads
