"""Latency of each cascade stage per batch size: measured online (EWMA), with a conservative
extrapolation for batch sizes not yet seen, plus DiffServe's published A100 profiles for simulation."""

from __future__ import annotations

from dataclasses import dataclass, field

from cluster.cascade.allocation import StageProfile

# DiffServe's profiled latencies (ms per batch, A100, repo profiling/*.csv), as summarised in
# shared/reference/peers-and-diffserve.md §1.7. Used by the simulator and the benchmark only.
DIFFSERVE_MS: dict[str, dict[int, float]] = {
    "sdturbo": {1: 100, 2: 150, 4: 220, 8: 410, 16: 770, 32: 1560},
    "sdxs": {1: 50, 2: 60, 4: 80, 8: 130, 16: 240, 32: 480},
    "sdv15": {1: 1780, 2: 2160, 4: 3680, 8: 6790, 16: 12880, 32: 25350},
    "sdxl-lightning": {1: 550, 2: 980, 4: 1850, 8: 3580, 16: 7100},
    "sdxl": {1: 6100, 2: 10650, 4: 20920, 8: 40230, 16: 79110},
}
DISCRIMINATOR_MS = 20.0  # per batch in DiffServe's simulation mode


def reference_profile(model: str, batch_sizes: tuple[int, ...] | None = None, extra_s: float = 0.0) -> StageProfile:
    table = DIFFSERVE_MS[model]
    sizes = tuple(b for b in (batch_sizes or tuple(table)) if b in table)
    return StageProfile(sizes, tuple(table[b] / 1e3 + extra_s for b in sizes))


@dataclass
class LatencyProfile:
    """EWMA seconds per batch for one stage, keyed by batch size.

    An unseen batch size b is priced from the nearest measured size m as latency(m) * b / m when
    b > m (no batching gain assumed) and latency(m) when b < m: pessimistic, so the controller only
    counts on batching gains it has measured."""

    alpha: float = 0.3
    default_s: float = 1.0
    measured: dict[int, float] = field(default_factory=dict)

    def observe(self, batch: int, seconds: float) -> None:
        prev = self.measured.get(batch)
        self.measured[batch] = seconds if prev is None else prev + self.alpha * (seconds - prev)

    def latency(self, batch: int) -> float:
        if batch in self.measured:
            return self.measured[batch]
        if not self.measured:
            return self.default_s * batch
        below = [m for m in self.measured if m < batch]
        if below:
            m = max(below)
            return self.measured[m] * batch / m
        return self.measured[min(self.measured)]

    def stage(self, batch_sizes: tuple[int, ...]) -> StageProfile:
        return StageProfile(tuple(batch_sizes), tuple(self.latency(b) for b in batch_sizes))
