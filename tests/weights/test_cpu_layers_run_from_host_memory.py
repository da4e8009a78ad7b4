"""On a CPU executor host memory is device memory: a resident layer is its host tensors themselves, not a
second copy (which doubled the memory and the first load's time). An emulated host-to-device bandwidth
still copies, and a layer read back from the disk tier runs from torch-aligned memory."""

from __future__ import annotations

import torch

from .conftest import WIDTH, stack, weights_of


def host_ptrs(cache, key: str) -> dict[str, int]:
    return {n: t.data_ptr() for n, t in cache.host._models[key].items()}


@torch.inference_mode()
def test_resident_cpu_layers_are_the_host_tensors(make_cache):
    cache = make_cache()
    ref, w = weights_of(0)
    cache.register("a", lambda: stack(), lambda m: list(m), w)
    x = torch.randn(3, WIDTH)
    with cache.use("a") as model:
        assert torch.equal(model(x), ref(x))
        bound = {n: t.data_ptr() for n, t in model.state_dict().items()}
    assert bound == host_ptrs(cache, "a")


@torch.inference_mode()
def test_an_emulated_bandwidth_still_copies(make_cache):
    cache = make_cache(bandwidth=1e12)
    ref, w = weights_of(1)
    cache.register("a", lambda: stack(), lambda m: list(m), w)
    with cache.use("a") as model:
        bound = {n: t.data_ptr() for n, t in model.state_dict().items()}
    assert not set(bound.values()) & set(host_ptrs(cache, "a").values())


@torch.inference_mode()
def test_layers_from_the_disk_tier_run_from_aligned_memory(make_cache):
    cache = make_cache(host_capacity=1)  # a second model pushes the first to disk
    refs = {}
    for seed, key in enumerate("ab"):
        refs[key], w = weights_of(seed)
        cache.register(key, lambda: stack(), lambda m: list(m), w)
    cache.drop("a")
    x = torch.randn(3, WIDTH)
    with cache.use("a") as model:
        assert torch.equal(model(x), refs["a"](x))
        assert all(t.data_ptr() % 64 == 0 for t in model.state_dict().values())
    assert cache.host.loads_from_disk > 0
