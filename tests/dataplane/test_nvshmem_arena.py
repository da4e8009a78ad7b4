"""The GPU arena on NVSHMEM's symmetric heap: same interface and behaviour as the shm arena."""
from __future__ import annotations

import uuid

import pytest
import torch

nvshmem_core = pytest.importorskip("nvshmem.core", reason="nvshmem4py (the gpu extra) is not installed")
if not torch.cuda.is_available():
    pytest.skip("NVSHMEM needs a CUDA device", allow_module_level=True)


@pytest.fixture(scope="module")
def one_pe():
    from cuda.core.experimental import Device
    dev = Device(0)
    dev.set_current()
    uid = nvshmem_core.get_unique_id()
    nvshmem_core.init(device=dev, uid=uid, rank=0, nranks=1, initializer_method="uid")
    yield
    nvshmem_core.finalize()


def test_publish_and_pull_through_the_symmetric_heap(one_pe):
    from cluster.dataplane.arena import NvshmemArena
    from cluster.dataplane.tensor_store import TensorStore
    owner = f"g{uuid.uuid4().hex[:8]}"
    arena = NvshmemArena(1 << 22)
    store = TensorStore(arena, owner, f"cc-{owner}-")
    try:
        src = torch.randn(64, 64, device="cuda", dtype=torch.float16)
        h = store.publish(src)
        assert h.pe == 0 and h.segment == arena.name
        with store.scope() as s:
            got = s.fetch(h)
            torch.cuda.synchronize()
            assert got.device.type == "cuda" and torch.equal(got, src)
        assert store.collect() == 1 and arena.used_bytes == 0
    finally:
        store.close()
        arena.close()
