"""The host tier beside a GPU counts pinned memory as torch's caching host allocator holds it (each
block rounded up to a power of two), so its capacity bounds the memory really pinned."""

from __future__ import annotations

import torch

from cluster.weights.tiers import DiskTier, HostTier, held_bytes


def test_pinned_blocks_are_counted_at_the_allocators_power_of_two():
    t = torch.zeros(750)  # 3000 bytes
    assert held_bytes(t, pinned=False) == 3000
    assert held_bytes(t, pinned=True) == 4096
    assert held_bytes(torch.zeros(1024), pinned=True) == 4096
    assert held_bytes(torch.zeros(0), pinned=True) == 0


def test_pinned_models_past_the_capacity_go_to_disk(tmp_path, monkeypatch):
    # no CUDA here: pinning is a copy, as far as the tier's accounting goes
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: self.clone())
    host = HostTier(DiskTier(tmp_path), capacity=10_000, pin=True)
    for key in "abc":
        host.put(key, {"w": torch.zeros(750)})  # 3000 bytes each, 4096 pinned: 9000 would fit, 12288 not
    assert host.nbytes() == 8192
    assert host.disk.has("a") and not host.disk.has("b")
    assert host.get("a", ["w"])["w"].shape == (750,) and host.loads_from_disk == 1
