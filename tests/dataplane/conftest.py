from __future__ import annotations

import importlib.util
import sys
import uuid
from pathlib import Path

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


def _load_fake_nvshmem():
    # the suite imports in importlib mode (no test folder on sys.path): load the helper by its path
    name = "cc_tests_fake_nvshmem"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("fake_nvshmem.py"))
        sys.modules[name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
def fake_nvshmem():
    """The CPU stand-in for nvshmem4py 0.4.1 and cuda.core (tests/dataplane/fake_nvshmem.py)."""
    return _load_fake_nvshmem()


@pytest.fixture
def nvshmem_team(fake_nvshmem, monkeypatch):
    """nvshmem_team(n) -> a fake team of n PEs installed as `nvshmem.core` for the test (a collective
    that a member never reaches raises Hang after `deadline_s`)."""

    def make(n: int = 2, deadline_s: float = 10.0):
        team = fake_nvshmem.Team(n, deadline_s)
        team.install(monkeypatch)
        return team

    return make
