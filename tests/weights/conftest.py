from __future__ import annotations

import pytest
import torch
from torch import nn

from cluster.dataplane.budget import MemoryBudget
from cluster.weights.cache import LayerCache
from cluster.weights.tiers import DiskTier, HostTier, HostToDevice

WIDTH = 64
LAYER_BYTES = (WIDTH * WIDTH + WIDTH) * 4


def stack(layers: int = 4) -> nn.Module:
    return nn.Sequential(*[nn.Linear(WIDTH, WIDTH) for _ in range(layers)])


def weights_of(seed: int, layers: int = 4) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    torch.manual_seed(seed)
    ref = stack(layers).eval()
    return ref, {k: v.clone() for k, v in ref.state_dict().items()}


@pytest.fixture
def make_cache(tmp_path):
    def make(
        budget_bytes: int = 1 << 30, bandwidth: float | None = None, arena=None, host_capacity: int | None = None
    ) -> LayerCache:
        host = HostTier(DiskTier(tmp_path / "disk"), capacity=host_capacity)
        return LayerCache(MemoryBudget(budget_bytes), host, HostToDevice("cpu", bandwidth), arena=arena)

    return make
