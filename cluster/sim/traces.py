"""Request traces: a production-like generator and CSV replay (`time,tenant,workflow`).

The generator follows how the papers shape their workloads: a diurnal rate (one compressed "day"
per `period_s`, as DiffServe compresses the Azure Functions hours), Gamma inter-arrival times with a
chosen coefficient of variation (ServerlessT2I §8.2 resamples its trace as a Gamma process to vary
burstiness; CoV 1 is Poisson), skewed (Zipf) workflow popularity and tenants with different
workflow mixes and traffic shares.

A Gamma renewal process is drawn in operational time (the integral of the rate), then mapped back
through the rate's inverse integral, so the local CoV stays the chosen one while the rate follows the
diurnal curve.

Two kinds (`TraceSpec.kind`):
  mix    `tenants` tenants share one arrival process, each with its own Zipf mix over the workflows.
  paper  as ServerlessT2I §8.1 builds its workload, "randomly assigning workflows to the top-tier tenant
         traffic": one tenant per workflow, tenant shares Zipf, and each tenant its own bursts: its own
         inter-arrival CoV (log-normal around 1.6, so about 75 % of tenants are above 1, as §2.2's Fig. 2
         finds for most functions) and a rate that jumps from one `burst_window_s` window to the next
         (window rates log-normal with CoV `burst_cov`), under the shared diurnal curve.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class TraceRequest:
    time: float  # seconds from the start of the trace
    tenant: str
    workflow: str


@dataclass(frozen=True)
class TraceSpec:
    duration_s: float = 60.0
    rate: float = 4.0  # mean requests per second over the whole trace
    cov: float = 1.0  # of inter-arrival times
    diurnal_amplitude: float = 0.5  # rate swings between (1 - a) and (1 + a) times the mean
    period_s: float | None = None  # one diurnal cycle; None: the whole trace
    tenants: int = 4
    zipf: float = 1.1  # popularity skew of workflows within a tenant and of tenants
    seed: int = 0
    kind: str = "mix"  # mix | paper (see the module docstring)
    burst_window_s: float = 10.0  # paper: each tenant's rate is constant within a window ...
    burst_cov: float = 2.0  # ... and varies between windows with this CoV


def zipf_weights(n: int, s: float) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1) ** s
    return w / w.sum()


def _diurnal_inverse(spec: TraceSpec) -> tuple[np.ndarray, np.ndarray]:
    """Grid of (operational time, real time): Lambda(t) = integral of rate(t) / mean rate."""
    period = spec.period_s or spec.duration_s
    t = np.linspace(0.0, spec.duration_s, max(2000, int(spec.duration_s * 20)))
    # starts at the trough, peaks mid-period (the afternoon peak of a production day)
    phase = 2 * math.pi * t / period
    a = spec.diurnal_amplitude
    lam = t - a * period / (2 * math.pi) * np.sin(phase)
    return lam, t


TRACE_KINDS = ("mix", "paper")


def generate(spec: TraceSpec, workflows: Sequence[str]) -> list[TraceRequest]:
    if spec.cov <= 0 or spec.rate <= 0:
        raise ValueError("rate and cov must be positive")
    if not 0 <= spec.diurnal_amplitude < 1:
        raise ValueError("diurnal_amplitude must be in [0, 1)")
    if spec.kind not in TRACE_KINDS:
        raise ValueError(f"unknown trace kind {spec.kind!r}; choose one of {TRACE_KINDS}")
    if spec.kind == "paper":
        return _paper_trace(spec, list(workflows))
    rng = np.random.default_rng(spec.seed)
    shape = 1.0 / spec.cov**2
    lam, t = _diurnal_inverse(spec)
    horizon = lam[-1] * spec.rate  # expected arrivals
    n = int(horizon + 10 * math.sqrt(horizon) * max(1.0, spec.cov) + 20)
    ops = np.cumsum(rng.gamma(shape, 1.0 / shape, size=n)) / spec.rate
    ops = ops[ops < lam[-1]]
    times = np.interp(ops, lam, t)

    names = [f"tenant{i}" for i in range(spec.tenants)]
    shares = zipf_weights(spec.tenants, spec.zipf)
    wf = list(workflows)
    mixes = []
    for _ in range(spec.tenants):
        # each tenant favours its own ordering of the catalogue (different workflow mixes)
        order = rng.permutation(len(wf))
        w = np.empty(len(wf))
        w[order] = zipf_weights(len(wf), spec.zipf)
        mixes.append(w)
    who = rng.choice(spec.tenants, size=len(times), p=shares)
    out = []
    for when, k in zip(times, who):
        out.append(TraceRequest(float(when), names[k], wf[rng.choice(len(wf), p=mixes[k])]))
    return out


def _lognormal_mean_one(rng: np.random.Generator, cov: float, size: int) -> np.ndarray:
    sigma2 = math.log1p(cov**2)
    return rng.lognormal(-sigma2 / 2, math.sqrt(sigma2), size=size)


def _paper_trace(spec: TraceSpec, workflows: list[str]) -> list[TraceRequest]:
    """One tenant per workflow, each with its own share, CoV and burst windows (see the docstring)."""
    rng = np.random.default_rng(spec.seed)
    period = spec.period_s or spec.duration_s
    t = np.linspace(0.0, spec.duration_s, max(2000, int(spec.duration_s * 20)))
    diurnal = 1 - spec.diurnal_amplitude * np.cos(2 * math.pi * t / period)  # trough first, as `mix`
    windows = int(math.ceil(spec.duration_s / spec.burst_window_s))
    order = rng.permutation(len(workflows))
    shares = zipf_weights(len(workflows), spec.zipf)
    out = []
    for rank, k in enumerate(order):
        wf = workflows[k]
        cov = float(math.exp(rng.normal(math.log(1.6), 0.7)))
        bursts = _lognormal_mean_one(rng, spec.burst_cov, windows)
        rate = (
            spec.rate * shares[rank] * diurnal * bursts[np.minimum((t / spec.burst_window_s).astype(int), windows - 1)]
        )
        ops = np.concatenate([[0.0], np.cumsum((rate[1:] + rate[:-1]) / 2 * np.diff(t))])  # expected arrivals
        shape = 1.0 / cov**2
        n = int(ops[-1] + 10 * math.sqrt(ops[-1] + 1) * max(1.0, cov) + 20)
        arrivals = np.cumsum(rng.gamma(shape, 1.0 / shape, size=n))
        arrivals = arrivals[arrivals < ops[-1]]
        out += [TraceRequest(float(x), f"tenant-{wf}", wf) for x in np.interp(arrivals, ops, t)]
    out.sort(key=lambda r: r.time)
    return out


def tenant_covs(trace: Sequence[TraceRequest]) -> dict[str, float]:
    """Each tenant's inter-arrival CoV (tenants with fewer than three requests left out)."""
    times: dict[str, list[float]] = {}
    for r in trace:
        times.setdefault(r.tenant, []).append(r.time)
    return {k: iat_cov([TraceRequest(x, k, "") for x in v]) for k, v in times.items() if len(v) >= 3}


def scale(trace: Sequence[TraceRequest], rate_scale: float) -> list[TraceRequest]:
    """The same requests at `rate_scale` times the rate (time compressed)."""
    return [TraceRequest(r.time / rate_scale, r.tenant, r.workflow) for r in trace]


def iat_cov(trace: Sequence[TraceRequest]) -> float:
    t = np.array(sorted(r.time for r in trace))
    iat = np.diff(t)
    return float(iat.std() / iat.mean())


def write_csv(trace: Iterable[TraceRequest], path: str | Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["time", "tenant", "workflow"])
        for r in trace:
            w.writerow([repr(r.time), r.tenant, r.workflow])


def read_csv(path: str | Path, known: Iterable[str] | None = None) -> list[TraceRequest]:
    """Rows of time,tenant,workflow (a header row is optional), sorted by time."""
    allowed = set(known) if known is not None else None
    out = []
    with open(path, newline="") as f:
        for i, row in enumerate(csv.reader(f)):
            if not row or row[0].startswith("#"):
                continue
            if i == 0 and row[0].strip().lower() == "time":
                continue
            if len(row) != 3:
                raise ValueError(f"{path}:{i + 1}: expected time,tenant,workflow, got {row}")
            r = TraceRequest(float(row[0]), row[1].strip(), row[2].strip())
            if allowed is not None and r.workflow not in allowed:
                raise ValueError(f"{path}:{i + 1}: unknown workflow {r.workflow!r}")
            out.append(r)
    out.sort(key=lambda r: r.time)
    return out
