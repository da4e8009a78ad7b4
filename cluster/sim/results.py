"""What one simulation run measured, and the figures derived from it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class RequestRecord:
    arrival: float
    tenant: str
    workflow: str
    finish: float | None  # None: still unfinished at the horizon
    deadline: float
    solo_s: float
    load_s: float  # exposed loading, summed over the request's invocations
    compute_s: float
    transfer_s: float

    @property
    def latency(self) -> float | None:
        return None if self.finish is None else self.finish - self.arrival

    @property
    def met(self) -> bool:
        return self.finish is not None and self.finish <= self.deadline + 1e-9


@dataclass(frozen=True)
class Completion:
    time: float
    tenant: str
    gpu_s: float  # GPU time the finished invocation used (its tenant's service)


@dataclass
class SimResult:
    system: str
    policy: str
    gpus: int
    requests: list[RequestRecord]
    end_s: float
    memory_utilisation: float
    loads: dict[str, int]
    cp_cpu_s: float
    gpu_busy_s: float
    decisions: int
    max_inflight: int
    completions: list[Completion] = field(default_factory=list)
    vtimes: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    warmup_s: float = 0.0  # requests that arrive earlier are left out of the figures (cold caches)

    @property
    def measured(self) -> list[RequestRecord]:
        return [r for r in self.requests if r.arrival >= self.warmup_s]

    @property
    def completed(self) -> int:
        return sum(r.finish is not None for r in self.requests)

    @property
    def attainment(self) -> float:
        """Share of requests that finished by their deadline (unfinished ones count as misses)."""
        reqs = self.measured
        return sum(r.met for r in reqs) / len(reqs) if reqs else 1.0

    def latency_percentile(self, q: float) -> float:
        lat = [r.latency for r in self.measured if r.latency is not None]
        return float(np.percentile(lat, q)) if lat else float("nan")

    @property
    def overhead(self) -> float:
        """Control-plane CPU time over the simulated GPU time it dispatched."""
        return self.cp_cpu_s / self.gpu_busy_s if self.gpu_busy_s > 0 else 0.0

    @property
    def control_plane_load(self) -> float:
        """Control-plane CPU time per simulated second: the share of one core it needs to keep up."""
        return self.cp_cpu_s / self.end_s if self.end_s > 0 else 0.0

    def breakdown(self) -> dict[str, float]:
        """Mean seconds per finished request: queueing, exposed loading, compute, transfer."""
        done = [r for r in self.measured if r.finish is not None]
        if not done:
            return {"queue": 0.0, "load": 0.0, "compute": 0.0, "transfer": 0.0}
        n = len(done)
        load = sum(r.load_s for r in done) / n
        comp = sum(r.compute_s for r in done) / n
        xfer = sum(r.transfer_s for r in done) / n
        lat = sum(r.latency for r in done) / n
        # work off the critical path (parallel encoders) can exceed latency - queue; clamp at zero
        return {"queue": max(0.0, lat - load - comp - xfer), "load": load, "compute": comp, "transfer": xfer}

    def service(self, tenants: tuple[str, str], times: np.ndarray) -> np.ndarray:
        """W_a(t) - W_b(t): cumulative GPU time of tenant a minus tenant b at each time."""
        a, b = tenants
        out = np.zeros(len(times))
        ev = sorted(self.completions, key=lambda c: c.time)
        diff, j = 0.0, 0
        for k, t in enumerate(times):
            while j < len(ev) and ev[j].time <= t:
                c = ev[j]
                diff += c.gpu_s if c.tenant == a else -c.gpu_s if c.tenant == b else 0.0
                j += 1
            out[k] = diff
        return out

    def vtime_gap(self, tenants: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
        """(times, v_a - v_b): the scheduler's own vTime difference, the quantity the bound is on."""
        a, b = tenants
        pts = [(t, v[a] - v[b]) for t, v in self.vtimes if a in v and b in v]
        return np.array([p[0] for p in pts]), np.array([p[1] for p in pts])

    def max_charge(self) -> float:
        return max((c.gpu_s for c in self.completions), default=0.0)

    def groups(self, by: str) -> dict[str, dict[str, float | int]]:
        """Requests, SLO attainment and p50/p95 latency per `workflow` or per `tenant`: which ones miss."""
        out: dict[str, list[RequestRecord]] = {}
        for r in self.measured:
            out.setdefault(getattr(r, by), []).append(r)
        return {k: _figures(v) for k, v in sorted(out.items())}

    def summary(self) -> dict:
        return {
            "system": self.system,
            "policy": self.policy,
            "gpus": self.gpus,
            "requests": len(self.requests),
            "completed": self.completed,
            "slo_attainment": round(self.attainment, 4),
            "p50_s": round(self.latency_percentile(50), 3),
            "p95_s": round(self.latency_percentile(95), 3),
            "by_workflow": self.groups("workflow"),
            "by_tenant": self.groups("tenant"),
            "memory_utilisation": round(self.memory_utilisation, 4),
            "loads": dict(self.loads),
            "decisions": self.decisions,
            "max_inflight": self.max_inflight,
            "overhead": round(self.overhead, 5),
            "control_plane_load": round(self.control_plane_load, 5),
            "breakdown_s": {k: round(v, 3) for k, v in self.breakdown().items()},
        }


def _figures(reqs: list[RequestRecord]) -> dict[str, float | int]:
    lat = [r.latency for r in reqs if r.latency is not None]
    pct = (lambda q: round(float(np.percentile(lat, q)), 3)) if lat else (lambda q: float("nan"))
    return {
        "requests": len(reqs),
        "slo_attainment": round(sum(r.met for r in reqs) / len(reqs), 4),
        "p50_s": pct(50),
        "p95_s": pct(95),
    }
