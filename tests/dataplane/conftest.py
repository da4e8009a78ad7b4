from __future__ import annotations

import uuid

import pytest

from cluster.dataplane.arena import ShmArena
from cluster.dataplane.tensor_store import TensorStore


@pytest.fixture
def make_store():
    """make_store(arena_bytes, **kw) -> a TensorStore on a fresh named arena; all closed afterwards."""
    made: list[TensorStore] = []

    def make(arena_bytes: int = 1 << 20, owner: str | None = None, **kw) -> TensorStore:
        owner = owner or f"t{uuid.uuid4().hex[:10]}"
        prefix = f"cc-{owner}-"
        store = TensorStore(ShmArena(prefix, arena_bytes), owner, prefix, **kw)
        made.append(store)
        return store

    yield make
    for s in made:
        s.close()
        s.arena.close()
