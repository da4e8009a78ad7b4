"""Layer cache: correct outputs from bound layers, eviction order, prefix streaming, tiers."""

from __future__ import annotations

import pytest
import torch

from cluster.weights.lookup import split_layers

from .conftest import LAYER_BYTES, WIDTH, stack, weights_of


def register(cache, key: str, seed: int, layers: int = 4):
    ref, w = weights_of(seed, layers)
    cache.register(key, lambda: stack(layers), lambda m: list(m), w)
    return ref


@torch.inference_mode()
def test_cached_model_computes_like_the_original(make_cache):
    cache = make_cache()
    ref = register(cache, "a", 0)
    x = torch.randn(5, WIDTH)
    with cache.use("a") as model:
        assert torch.equal(model(x), ref(x))
    assert cache.resident("a") == [0, 1, 2, 3]
    assert cache.budget.weights == 4 * LAYER_BYTES


@torch.inference_mode()
def test_eviction_takes_lru_model_first_and_its_layers_in_reverse(make_cache):
    # Room for 7 layers: B pushes out A's last layer; C then takes the rest of A (2, 1, 0), then B's last.
    cache = make_cache(budget_bytes=7 * LAYER_BYTES)
    refs = {k: register(cache, k, s) for s, k in enumerate("ABC")}
    x = torch.randn(2, WIDTH)
    for k in "AB":
        with cache.use(k) as m:
            m(x)
    with cache.use("C") as m:
        assert torch.equal(m(x), refs["C"](x))
    assert cache.evictions == [("A", 3), ("A", 2), ("A", 1), ("A", 0), ("B", 3)]
    assert cache.resident("B") == [0, 1, 2] and cache.resident("C") == [0, 1, 2, 3]
    # B kept its first layers and runs; its missing layer comes from C, now the LRU idle model.
    with cache.use("B") as m:
        assert torch.equal(m(x), refs["B"](x))
    assert cache.evictions[5:] == [("C", 3)]


@torch.inference_mode()
def test_partial_eviction_keeps_the_first_layers(make_cache):
    cache = make_cache()
    register(cache, "a", 0, layers=6)
    cache.warm("a")
    freed = cache.evict(2 * LAYER_BYTES + 1)
    assert freed == 3 * LAYER_BYTES and cache.resident("a") == [0, 1, 2]


@torch.inference_mode()
def test_a_model_in_use_is_not_evicted(make_cache):
    cache = make_cache(budget_bytes=4 * LAYER_BYTES)
    register(cache, "a", 0)
    register(cache, "b", 1)
    with cache.use("a") as m:
        m(torch.randn(1, WIDTH))
        assert cache.evict(LAYER_BYTES) == 0
    assert cache.evict(LAYER_BYTES) == LAYER_BYTES


@torch.inference_mode()
def test_cold_model_starts_before_its_last_layers_arrive(make_cache):
    # Slow copies (LAYER_BYTES at 1 MB/s is ~17 ms per layer): layer 0 resident, 1..5 stream in.
    cache = make_cache(bandwidth=1e6)
    ref = register(cache, "a", 0, layers=6)
    cache.warm("a", 1)
    seen: list[tuple[int, list[int]]] = []
    for i, block in enumerate(cache.blocks("a")):
        block.register_forward_hook(lambda m, a, o, i=i: seen.append((i, cache.resident("a"))))
    x = torch.randn(3, WIDTH)
    with cache.use("a") as model:
        y = model(x)
    assert torch.equal(y, ref(x))
    first_done, resident_then = seen[0]
    assert first_done == 0 and len(resident_then) < 6  # layer 0 finished while later layers were loading
    assert cache.resident("a") == list(range(6))


@torch.inference_mode()
def test_layers_fall_back_to_disk_when_host_memory_is_short(make_cache):
    cache = make_cache(host_capacity=5 * LAYER_BYTES)
    refs = {k: register(cache, k, s) for s, k in enumerate("ab")}
    x = torch.randn(2, WIDTH)
    assert cache.host.disk.has("a") and not cache.host.disk.has("b")  # a was written out for b
    with cache.use("a") as m:
        assert torch.equal(m(x), refs["a"](x))
    assert cache.host.loads_from_disk == 4


def test_split_layers_puts_loose_parameters_in_layer_zero():
    model = torch.nn.Module()
    model.embed = torch.nn.Embedding(4, 2)
    model.blocks = torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2)])
    model.head = torch.nn.Linear(2, 1)
    layers = split_layers(model, list(model.blocks))
    assert set(layers[0]) == {"embed.weight", "blocks.0.weight", "blocks.0.bias", "head.weight", "head.bias"}
    assert set(layers[1]) == {
        "blocks.1.weight",
        "blocks.1.bias",
        "blocks.1.running_mean",
        "blocks.1.running_var",
        "blocks.1.num_batches_tracked",
    }


def test_bind_rejects_wrong_shapes(make_cache):
    cache = make_cache()
    register(cache, "a", 0)
    table = cache._models["a"].table
    with pytest.raises(ValueError):
        table.bind(0, {"0.weight": torch.zeros(3, 3), "0.bias": torch.zeros(WIDTH)}, "framework")


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(WIDTH, WIDTH)
        self.blocks = torch.nn.ModuleList([torch.nn.Linear(WIDTH, WIDTH) for _ in range(3)])
        self.head = torch.nn.Linear(WIDTH, 2)

    def forward(self, x):
        x = self.embed(x)
        for b in self.blocks:
            x = torch.relu(b(x))
        return self.head(x)


@torch.inference_mode()
def test_adopting_a_loaded_module_moves_its_weights_behind_the_cache(make_cache):
    torch.manual_seed(0)
    net = _Net().eval()
    ref = _Net().eval()
    ref.load_state_dict(net.state_dict())
    cache = make_cache(bandwidth=2e6)
    cache.register_module("net", net)  # default blocks: the ModuleList
    assert net.blocks[0].weight.is_meta and net.head.weight.is_meta and cache.resident("net") == []
    x = torch.randn(4, WIDTH)
    with cache.use("net") as m:
        assert m is net and torch.equal(m(x), ref(x))
    assert cache.resident("net") == [0, 1, 2]
