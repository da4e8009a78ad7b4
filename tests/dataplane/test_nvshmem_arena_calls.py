"""The GPU arena's calls into nvshmem4py 0.4.1, checked on the CPU against a stand-in that enforces them
(tests/dataplane/fake_nvshmem.py): transfers on a real stream, blocks named by their exact address,
publish and pull landed before the handle moves on. The real library runs in test_nvshmem_arena.py."""

from __future__ import annotations

import uuid

import pytest
import torch

from cluster.dataplane.arena import NvshmemArena, copy_from_segment
from cluster.dataplane.segments import PeerMaps, SegmentError
from cluster.dataplane.tensor_store import TensorStore


@pytest.fixture
def two_pes(nvshmem_team, fake_nvshmem):
    """Two PEs, each with its arena (allocated collectively, in the same order) and tensor store."""
    team = nvshmem_team(2)
    arenas = team.each_pe(lambda pe: NvshmemArena(1 << 16, stream=fake_nvshmem.FakeStream()))
    stores = []
    for arena in arenas:
        owner = f"n{uuid.uuid4().hex[:8]}"
        stores.append(TensorStore(arena, owner, f"cc-{owner}-"))
    yield team, stores
    for store in stores:
        store.close()
    team.each_pe(lambda pe: stores[pe].arena.close())


def test_the_stand_in_refuses_what_nvshmem4py_refuses(nvshmem_team, fake_nvshmem):
    team = nvshmem_team(1)
    heap = team.tensor((4096,), dtype=torch.uint8)
    with pytest.raises(NotImplementedError):
        team.get(heap, heap, remote_pe=0, stream=None)  # no stream-less transfers
    with pytest.raises(NotImplementedError):
        team.quiet(stream=None)
    with pytest.raises(fake_nvshmem.NvshmemInvalid):
        team.get(heap[64:128], heap[128:192], remote_pe=0, stream=fake_nvshmem.FakeStream())  # slices


def test_a_pull_from_another_pe_copies_exactly_the_published_block(two_pes):
    team, (prod, cons) = two_pes
    with team.as_pe(0):
        first = prod.publish(torch.arange(100, dtype=torch.float32))
        src = torch.randn(16, 8).to(torch.float16)
        h = prod.publish(src)
    assert h.pe == 0 and h.segment == "nvshmem-0" and h.offset > 0 == first.offset
    with team.as_pe(1), cons.scope() as scope:
        got = scope.fetch(h)
        assert got.dtype == torch.float16 and torch.equal(got, src)
    # one get of the tensor's bytes from PE 0, issued by PE 1 (not the whole arena)
    assert team.gets == [(1, 0, h.nbytes)]
    assert cons.arena.stream.queue == []  # synchronised before the handle's generation was checked


def test_a_pull_into_a_spill_lands_too(two_pes):
    team, (prod, cons) = two_pes
    with team.as_pe(0):
        h = prod.publish(torch.ones(1 << 13, dtype=torch.float32))  # 32 KiB: half of each arena
    with team.as_pe(1):
        hold = cons.arena.alloc(cons.arena.capacity)  # the consumer's arena is full
        with cons.scope() as scope:
            got = scope.fetch(h)
        assert cons.stats.spilled_in == 1 and torch.equal(got, torch.ones(1 << 13))
        cons.arena.free(hold)


def test_publish_hands_out_the_handle_after_the_copy_landed(two_pes):
    team, (prod, _) = two_pes
    before = prod.arena.stream.syncs
    with team.as_pe(0):
        h = prod.publish(torch.full((10,), 7.0))
    assert prod.arena.stream.syncs == before + 1
    assert torch.equal(prod.arena.view(h.offset, torch.float32, (10,)), torch.full((10,), 7.0))


def test_a_pull_outside_the_arena_or_into_a_wrong_buffer_is_refused(two_pes):
    team, (prod, cons) = two_pes
    with team.as_pe(0):
        h = prod.publish(torch.zeros(4))
    bad = type(h)(h.segment, cons.arena.capacity - 8, h.dtype, h.shape, h.nbytes, h.owner, pe=0)
    with team.as_pe(1):
        with pytest.raises(SegmentError):
            cons.arena.pull(bad, torch.empty(4))
        with pytest.raises(SegmentError):
            cons.arena.pull(h, torch.empty(5))


def test_a_host_handle_is_copied_into_device_memory_without_numpy_on_the_device_tensor(make_store):
    # A GPU arena pulling a spill or a CPU producer's block: `out` is not host memory. On the CPU the meta
    # device stands for it (`.numpy()` raises on it as on a CUDA tensor).
    prod = make_store()
    h = prod.publish(torch.arange(6, dtype=torch.int32))
    peers = PeerMaps()
    try:
        out = torch.empty(6, dtype=torch.int32, device="meta")
        copy_from_segment(peers, h.segment, h.offset, h.nbytes, out)
        host = torch.empty(6, dtype=torch.int32)
        copy_from_segment(peers, h.segment, h.offset, h.nbytes, host)
        assert torch.equal(host, torch.arange(6, dtype=torch.int32))
    finally:
        peers.close()


def test_a_torch_stream_without_the_stream_protocol_is_wrapped(nvshmem_team):
    # torch releases before the CUDA stream protocol: only `cuda_stream`, the handle
    class OldTorchStream:
        cuda_stream = 0x1234

        def synchronize(self) -> None:
            pass

    nvshmem_team(1)
    arena = NvshmemArena(1 << 16, stream=OldTorchStream())
    assert arena.rma_stream.__cuda_stream__() == (0, 0x1234)
    arena.close()
