"""The layer cache on a GPU: layers copied from pinned host memory on the copier's CUDA stream, each
block's forward waiting on its layer's event, so a cold model computes what a warm one does."""

from __future__ import annotations

import pytest
import torch

from cluster.dataplane.budget import MemoryBudget
from cluster.weights.cache import LayerCache
from cluster.weights.tiers import DiskTier, HostTier, HostToDevice

from .conftest import LAYER_BYTES, WIDTH, stack, weights_of

if not torch.cuda.is_available():
    pytest.skip("the CUDA copy path needs a CUDA device", allow_module_level=True)


def gpu_cache(tmp_path, budget_bytes: int = 1 << 30) -> LayerCache:
    host = HostTier(DiskTier(tmp_path / "disk"), pin=True)
    return LayerCache(MemoryBudget(budget_bytes), host, HostToDevice("cuda"))


def register(cache: LayerCache, key: str, seed: int, layers: int):
    ref, w = weights_of(seed, layers)
    cache.register(key, lambda: stack(layers), lambda m: list(m), w)
    return ref.cuda()


@torch.inference_mode()
def test_a_cold_model_streams_its_layers_and_computes_like_the_original(tmp_path):
    cache = gpu_cache(tmp_path)
    ref = register(cache, "a", 0, layers=8)
    cache.warm("a", 2)
    assert cache.resident("a") == [0, 1]
    x = torch.randn(5, WIDTH, device="cuda")
    with cache.use("a") as model:
        out = model(x)
    torch.cuda.synchronize()
    assert torch.equal(out, ref(x))
    assert cache.resident("a") == list(range(8))
    assert all(p.device.type == "cuda" for p in model.parameters())


@torch.inference_mode()
def test_evicted_layers_free_device_memory_and_come_back(tmp_path):
    cache = gpu_cache(tmp_path, budget_bytes=6 * LAYER_BYTES)
    refs = {k: register(cache, k, s, layers=4) for s, k in enumerate("ab")}
    x = torch.randn(3, WIDTH, device="cuda")
    with cache.use("a") as m:
        m(x)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    with cache.use("b") as m:
        assert torch.equal(m(x), refs["b"](x))
    assert cache.resident("a") == [0, 1]  # a's last two layers made room for b
    with cache.use("a") as m:
        assert torch.equal(m(x), refs["a"](x))
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() <= before + 2 * LAYER_BYTES + (1 << 20)


@torch.inference_mode()
def test_layers_dropped_while_their_copies_are_in_flight_come_back_whole(tmp_path):
    # warm issues the copies on the copier stream; drop retires the layers at once (waits on each copy,
    # records the compute stream's use) and the memory serves the next load
    cache = gpu_cache(tmp_path)
    ref = register(cache, "a", 3, layers=8)
    cache.warm("a")
    cache.drop("a")
    assert cache.resident("a") == []
    x = torch.randn(4, WIDTH, device="cuda")
    with cache.use("a") as model:
        out = model(x)
    torch.cuda.synchronize()
    assert torch.equal(out, ref(x))


def test_the_profile_times_copies_and_kernels_to_their_completion(tmp_path):
    from cluster.weights.prefix import profile_model

    cache = gpu_cache(tmp_path)
    ref = register(cache, "a", 4, layers=8)
    x = torch.randn(4, WIDTH, device="cuda")
    prof = profile_model(cache, "a", lambda model: model(x), repeats=2)
    assert prof.t_load > 0 and prof.t_comp > 0
    print(
        f"layer profile on {torch.cuda.get_device_name()}: T_load {prof.t_load * 1e6:.1f} us, "
        f"T_comp {prof.t_comp * 1e6:.1f} us, L_e' {prof.prefix} of {prof.layers}"
    )
    with torch.inference_mode(), cache.use("a") as model:
        assert torch.equal(model(x), ref(x))
