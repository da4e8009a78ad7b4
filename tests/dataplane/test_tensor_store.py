"""Producer -> consumer pulls through arenas: bytes, reference counts, lazy callbacks, spilling."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
from concurrent.futures import Future

import msgspec
import pytest
import torch

from cluster.dataplane.handle import TensorHandle
from cluster.dataplane.refcounts import StaleHandle
from cluster.dataplane.segments import SegmentError


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.float16])
def test_pull_returns_the_published_bytes(make_store, dtype):
    prod, cons = make_store(), make_store()
    src = (torch.randn(3, 5, 7) * 10).to(dtype)
    h = prod.publish(src)
    assert h.segment == prod.arena.name and h.nbytes == src.numel() * src.element_size()
    with cons.scope() as scope:
        got = scope.fetch(h)
        assert got.dtype == dtype and got.shape == src.shape and torch.equal(got, src)
        # The copy lands in the consumer's own arena, not in framework memory.
        assert cons.arena.used_bytes > 0 and cons.stats.spilled_in == 0
    assert cons.arena.used_bytes == 0  # the scope gave its block back


def test_non_contiguous_and_empty_tensors(make_store):
    prod, cons = make_store(), make_store()
    t = torch.arange(24.0).reshape(4, 6).t()
    e = torch.empty(0, 3)
    with cons.scope() as scope:
        assert torch.equal(scope.fetch(prod.publish(t)), t)
        assert scope.fetch(prod.publish(e)).shape == (0, 3)


def test_refcount_frees_after_last_reader(make_store):
    prod, a, b = make_store(), make_store(), make_store()
    h = prod.publish(torch.ones(1000), readers=2)
    used = prod.arena.used_bytes
    assert used > 0
    with a.scope() as s:
        s.fetch(h)
    assert prod.collect() == 0 and prod.arena.used_bytes == used  # one reader still to go
    with b.scope() as s:
        assert torch.equal(s.fetch(h), torch.ones(1000))
    assert prod.collect() == 1
    assert prod.arena.used_bytes == 0 and prod.table.live == 0
    # A handle whose tensor was reclaimed can neither be read nor released again.
    with pytest.raises(StaleHandle), a.scope() as s:
        s.fetch(h)
    with pytest.raises(StaleHandle):
        a.release(h)


def test_retain_adds_late_readers(make_store):
    prod, cons = make_store(), make_store()
    h = prod.publish(torch.zeros(10))
    assert cons.retain(h) == 2
    with cons.scope() as s:
        s.fetch(h)
    assert prod.collect() == 0
    cons.release(h)
    assert prod.collect() == 1


def test_arena_full_reclaims_dead_tensors_before_spilling(make_store):
    prod, cons = make_store(arena_bytes=64 << 10), make_store()
    h1 = prod.publish(torch.zeros(12 << 10, dtype=torch.uint8))  # 16 KiB block
    h2 = prod.publish(torch.zeros(40 << 10, dtype=torch.uint8))  # 64 KiB would be needed: no room
    assert h2.segment != prod.arena.name
    with cons.scope() as s:
        s.fetch(h1)
    h3 = prod.publish(torch.zeros(40 << 10, dtype=torch.uint8))  # fits once h1 is collected
    assert h3.segment == prod.arena.name and prod.stats.reclaimed == 1


def test_undersized_arenas_spill_instead_of_stalling(make_store):
    prod, cons = make_store(arena_bytes=16 << 10), make_store(arena_bytes=16 << 10)
    big = torch.randn(256, 256)  # 256 KiB, far over both arenas
    start = time.perf_counter()
    h = prod.publish(big, readers=1)
    assert h.segment.startswith(prod.prefix + "spill-") and prod.stats.spilled_out == 1
    with cons.scope() as s:
        assert torch.equal(s.fetch(h), big)
    assert cons.stats.spilled_in == 1
    assert time.perf_counter() - start < 5
    assert prod.collect() == 1
    with pytest.raises(SegmentError):  # the spill segment is gone once its reader released it
        cons.peers.get(h.segment)


def test_pressure_hook_makes_room_in_the_arena(make_store):
    freed = []
    prod = make_store(arena_bytes=64 << 10)
    squatter = prod.arena.alloc(60 << 10)  # e.g. cached weights living in the arena

    def evict(nbytes: int) -> int:
        prod.arena.free(squatter)
        freed.append(nbytes)
        return squatter.size

    prod.on_pressure = evict
    h = prod.publish(torch.zeros(8 << 10, dtype=torch.uint8))
    assert freed == [8 << 10] and h.segment == prod.arena.name


def test_callback_input_fetched_only_when_touched(make_store):
    prod, cons = make_store(), make_store()
    published = Future()
    t_publish = []

    def slow_producer():
        time.sleep(0.3)
        t_publish.append(time.perf_counter())
        published.set_result(prod.publish(torch.full((4,), 7.0)))

    unused = Future()
    unused.set_result(prod.publish(torch.zeros(4)))
    threading.Thread(target=slow_producer).start()
    with cons.scope() as scope:
        control, never = scope.lazy(published), scope.lazy(unused)
        t_start = time.perf_counter()  # the consumer runs before its input exists
        x = torch.ones(4) * 2  # ... its own work first ...
        assert not control.fetched and cons.stats.pulled == 0
        y = x + control()  # ... then reaches the callback input
        assert torch.equal(y, torch.full((4,), 9.0))
        assert control() is control()  # pulled once
    assert t_start < t_publish[0] <= control.fetched_at
    assert cons.stats.pulled == 1 and not never.fetched
    # Closing the scope released the untouched input too, so both tensors are reclaimed.
    assert prod.collect() == 2


def _producer_process(q_out, q_in, prefix: str) -> None:
    from cluster.dataplane.arena import ShmArena
    from cluster.dataplane.tensor_store import TensorStore

    store = TensorStore(ShmArena(prefix, 1 << 20), "p", prefix)
    g = torch.Generator().manual_seed(3)
    h = store.publish(torch.randn(64, 64, generator=g))
    q_out.put(msgspec.structs.asdict(h))
    q_in.get(timeout=60)  # wait until the reader is done
    q_out.put(store.collect())
    store.close()
    store.arena.close()


def test_pull_across_processes(make_store):
    ctx = mp.get_context("spawn")
    q_out, q_in = ctx.Queue(), ctx.Queue()
    import uuid

    p = ctx.Process(target=_producer_process, args=(q_out, q_in, f"cc-p{uuid.uuid4().hex[:8]}-"))
    p.start()
    try:
        h = TensorHandle(**q_out.get(timeout=60))
        cons = make_store()
        with cons.scope() as s:
            got = s.fetch(h)
        assert torch.equal(got, torch.randn(64, 64, generator=torch.Generator().manual_seed(3)))
        q_in.put("done")
        assert q_out.get(timeout=60) == 1  # the producer saw our one-sided release
    finally:
        p.join(30)


def test_lost_producer_raises(make_store):
    prod, cons = make_store(), make_store()
    h = prod.publish(torch.zeros(3))
    prod.close()
    prod.arena.close()
    with pytest.raises(SegmentError), cons.scope() as s:
        s.fetch(h)


def test_unmanaged_metadata_reads_a_plain_segment(make_store):
    from cluster.dataplane import segments

    name = f"cc-plain{__import__('uuid').uuid4().hex[:8]}"
    mm = segments.create(name, 4096)
    try:
        src = torch.arange(6, dtype=torch.int32)
        torch.frombuffer(mm, dtype=torch.uint8, count=24, offset=64).copy_(src.view(torch.uint8))
        h = TensorHandle(segment=name, offset=64, dtype="int32", shape=(2, 3), nbytes=24, owner="x")
        cons = make_store()
        with cons.scope() as s:
            assert torch.equal(s.fetch(h), src.view(2, 3))
        with pytest.raises(SegmentError), cons.scope() as s:  # metadata that overruns the segment
            s.fetch(msgspec.structs.replace(h, offset=4090))
    finally:
        segments.unlink(name)
