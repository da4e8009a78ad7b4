"""Prefix loading arithmetic and the per-layer profile it needs.

With L uniform layers, T_load to copy one and T_comp to run one, and the first L_e resident:
    T_e2e(L_e) = max(L * T_comp, (L - L_e) * T_load + T_comp)                      (paper Eq. 1)
    L_e' = ceil((L * (T_load - T_comp) + T_comp) / T_load)                         (paper Eq. 2)
is the shortest prefix that hides loading entirely. The two times are measured once per model and
device and kept in a JSON file.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from cluster.weights.cache import LayerCache


def prefix_length(layers: int, t_load: float, t_comp: float) -> int:
    """L_e' (Eq. 2), clamped to [0, layers]."""
    if t_load <= 0:
        return 0
    need = math.ceil((layers * (t_load - t_comp) + t_comp) / t_load - 1e-9)
    return max(0, min(layers, need))


def e2e_time(layers: int, resident: int, t_load: float, t_comp: float) -> float:
    """T_e2e (Eq. 1)."""
    if resident >= layers:
        return layers * t_comp
    return max(layers * t_comp, (layers - resident) * t_load + t_comp)


@dataclass(frozen=True)
class LayerProfile:
    layers: int
    t_load: float  # seconds to copy one layer host -> device (mean)
    t_comp: float  # seconds to run one layer (mean)

    @property
    def prefix(self) -> int:
        return prefix_length(self.layers, self.t_load, self.t_comp)


def profile_model(cache: LayerCache, key: str, run: Callable[[nn.Module], Any], repeats: int = 5) -> LayerProfile:
    """Measure T_comp (per block, warm, best of `repeats` runs) and T_load (each layer copied once
    through the cache's host -> device path). Leaves the model fully resident.

    On a GPU copies and kernels are asynchronous: both clocks stop only after the work landed (the
    copier's stream, the device), else T_load and T_comp are issue times and L_e' comes out 0."""
    cache.drop(key)
    sync = torch.cuda.synchronize if cache.device.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    cache.warm(key)
    cache.copier.synchronize()
    t_load = (time.perf_counter() - t0) / cache.num_layers(key)
    starts: dict[int, float] = {}
    spans: list[float] = []

    def start(i: int) -> Callable:
        def hook(_m, _a) -> None:
            sync()
            starts[i] = time.perf_counter()

        return hook

    def stop(i: int) -> Callable:
        def hook(_m, _a, _o) -> None:
            sync()
            spans.append(time.perf_counter() - starts[i])

        return hook

    hooks = []
    for i, block in enumerate(cache.blocks(key)):
        hooks.append(block.register_forward_pre_hook(start(i)))
        hooks.append(block.register_forward_hook(stop(i)))
    best = math.inf
    try:
        with torch.inference_mode(), cache.use(key) as model:
            run(model)  # warm-up
            for _ in range(repeats):
                spans.clear()
                run(model)
                best = min(best, sum(spans) / max(1, len(spans)))
    finally:
        for h in hooks:
            h.remove()
    return LayerProfile(cache.num_layers(key), t_load, best)


class ProfileStore:
    """Profiles by (model key, device) in one JSON file; profile once, reuse across restarts."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._data: dict[str, dict] = json.loads(self.path.read_text()) if self.path.is_file() else {}

    def get(self, key: str, device: str) -> LayerProfile | None:
        hit = self._data.get(f"{key}@{device}")
        return LayerProfile(**hit) if hit else None

    def put(self, key: str, device: str, profile: LayerProfile) -> None:
        self._data[f"{key}@{device}"] = asdict(profile)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._data, indent=1, sort_keys=True))
        tmp.replace(self.path)

    def get_or_profile(self, cache: LayerCache, key: str, run: Callable[[nn.Module], Any]) -> LayerProfile:
        device = str(cache.device)
        prof = self.get(key, device)
        if prof is None:
            prof = profile_model(cache, key, run)
            self.put(key, device, prof)
        return prof
