"""Weights in the arena (virtualization), the prefix formulas, profiles, the shared budget."""

from __future__ import annotations

import uuid

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from cluster.dataplane.arena import ShmArena
from cluster.dataplane.budget import MemoryBudget
from cluster.dataplane.tensor_store import TensorStore
from cluster.weights.prefix import LayerProfile, ProfileStore, e2e_time, prefix_length

from .conftest import LAYER_BYTES, WIDTH, stack, weights_of


@pytest.fixture
def arena():
    a = ShmArena(f"cc-w{uuid.uuid4().hex[:10]}-", 1 << 20)
    yield a
    a.close()


@torch.inference_mode()
def test_layers_over_budget_live_in_the_arena_without_copies(make_cache, arena):
    cache = make_cache(budget_bytes=2 * LAYER_BYTES, arena=arena)
    ref, w = weights_of(0)
    cache.register("a", lambda: stack(4), lambda m: list(m), w)
    x = torch.randn(3, WIDTH)
    with cache.use("a") as model:
        assert torch.equal(model(x), ref(x))
    assert cache.regions("a") == ["framework", "framework", "arena", "arena"]
    base = arena.view(0, torch.uint8, (arena.capacity,)).data_ptr()
    entry = cache._models["a"].table.entries[3]
    w3 = model[3].weight
    assert base <= w3.data_ptr() < base + arena.capacity  # the parameter is arena memory
    assert w3.data_ptr() == entry.tensors["3.weight"].data_ptr()  # bound, not copied


@torch.inference_mode()
def test_arena_pressure_evicts_arena_weights_so_tensors_fit(make_cache, arena):
    cache = make_cache(budget_bytes=0, arena=arena)
    _, w = weights_of(0, layers=6)
    cache.register("a", lambda: stack(6), lambda m: list(m), w)
    cache.warm("a")
    assert set(cache.regions("a")) == {"arena"}
    owner = f"s{uuid.uuid4().hex[:8]}"
    store = TensorStore(arena, owner, f"cc-{owner}-")
    try:
        chunk = torch.zeros(30 << 10, dtype=torch.uint8)
        while store.publish(chunk).segment == arena.name:  # fill the arena's free space
            pass
        store.on_pressure = cache.evict_arena
        h = store.publish(chunk)
        assert h.segment == arena.name  # it went into the arena: a cached layer made room
        assert cache.evictions == [("a", 5)] and cache.resident("a") == [0, 1, 2, 3, 4]
    finally:
        store.close()


@given(st.integers(1, 200), st.floats(1e-4, 1.0), st.floats(1e-4, 1.0))
def test_prefix_length_is_the_shortest_prefix_that_hides_loading(layers, t_load, t_comp):
    le = prefix_length(layers, t_load, t_comp)
    warm = layers * t_comp
    tol = 1e-9 * max(warm, layers * t_load)
    assert e2e_time(layers, le, t_load, t_comp) <= warm + tol
    if le > 0:
        assert e2e_time(layers, le - 1, t_load, t_comp) > warm - tol


def test_prefix_length_matches_the_paper_formula():
    # L=12, T_load = 3 T_comp: ceil((12*2 + 1) / 3) = 9
    assert prefix_length(12, 0.3, 0.1) == 9
    assert prefix_length(10, 0.05, 0.1) == 0  # loading is faster than compute: nothing to cache


def test_profiles_are_measured_once_and_persisted(make_cache, tmp_path):
    cache = make_cache()
    _, w = weights_of(0)
    cache.register("a", lambda: stack(4), lambda m: list(m), w)
    calls = []

    def run(model):
        calls.append(1)
        return model(torch.randn(2, WIDTH))

    store = ProfileStore(tmp_path / "profiles.json")
    prof = store.get_or_profile(cache, "a", run)
    assert prof.layers == 4 and prof.t_load > 0 and prof.t_comp > 0
    n = len(calls)
    again = ProfileStore(tmp_path / "profiles.json").get_or_profile(cache, "a", run)
    assert again == prof and len(calls) == n
    assert ProfileStore(tmp_path / "profiles.json").get("a", "cuda:0") is None
    assert LayerProfile(12, 0.3, 0.1).prefix == 9


def test_budget_evicts_weights_for_active_inference_and_overcommits_rather_than_stall(make_cache):
    cache = make_cache(budget_bytes=6 * LAYER_BYTES)
    _, w = weights_of(0)
    cache.register("a", lambda: stack(4), lambda m: list(m), w)
    cache.warm("a")
    budget = cache.budget
    with budget.reserve(3 * LAYER_BYTES) as fits:
        assert fits and cache.resident("a") == [0, 1, 2] and budget.free >= 0
    with budget.reserve(100 * LAYER_BYTES) as fits:
        assert not fits and budget.overcommitted == 1 and cache.resident("a") == []
    assert budget.active == 0


def test_budget_counts_the_arena():
    b = MemoryBudget(100, arena=40)
    assert b.free == 60 and b.charge_weights(60) and not b.charge_weights(1)
    with pytest.raises(ValueError):
        MemoryBudget(10, arena=11)
