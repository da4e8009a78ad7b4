"""The GPU arena on NVSHMEM's symmetric heap: same interface and behaviour as the shm arena.

Needs nvshmem4py and a CUDA device. Elsewhere it is skipped, except under scripts/gpu_check.sh
(COMFY_CLUSTER_GPU_CHECK=1), where a missing or broken nvshmem4py must fail the check, not pass it.
"""

from __future__ import annotations

import os
import uuid

import pytest
import torch

if os.environ.get("COMFY_CLUSTER_GPU_CHECK") == "1":
    import nvshmem.core as nvshmem_core

    assert torch.cuda.is_available(), "the GPU check runs where CUDA is"
else:
    nvshmem_core = pytest.importorskip("nvshmem.core", reason="nvshmem4py (the gpu extra) is not installed")
    if not torch.cuda.is_available():
        pytest.skip("NVSHMEM needs a CUDA device", allow_module_level=True)


@pytest.fixture(scope="module")
def one_pe():
    from cuda.core import Device  # as nvshmem4py 0.4.1 imports it (cuda-core >= 0.5)

    dev = Device(0)
    dev.set_current()
    uid = nvshmem_core.get_unique_id()
    nvshmem_core.init(device=dev, uid=uid, rank=0, nranks=1, initializer_method="uid")
    yield
    nvshmem_core.finalize()


def test_publish_and_pull_through_the_symmetric_heap(one_pe, make_store):
    from cluster.dataplane.arena import NvshmemArena
    from cluster.dataplane.tensor_store import TensorStore

    owner = f"g{uuid.uuid4().hex[:8]}"
    arena = NvshmemArena(1 << 22)
    store = TensorStore(arena, owner, f"cc-{owner}-")
    try:
        first = store.publish(torch.arange(10, device="cuda", dtype=torch.float32))
        src = torch.randn(64, 64, device="cuda", dtype=torch.float16)
        h = store.publish(src)
        assert h.pe == 0 and h.segment == arena.name and h.offset > first.offset == 0
        with store.scope() as s:
            got = s.fetch(h)  # a get from a block inside the symmetric allocation, not its start
            assert got.device.type == "cuda" and torch.equal(got, src)
            host = torch.arange(12, dtype=torch.int32)
            spilled = s.fetch(make_store().publish(host))  # a host (pe=-1) handle into the GPU arena
            assert spilled.device.type == "cuda" and torch.equal(spilled.cpu(), host)
        store.release(first)
        assert store.collect() == 2 and arena.used_bytes == 0
    finally:
        store.close()
        arena.close()
