"""Two backlogged tenants (paper §6 Fig. 9-right, §8.4 Fig. 13-right): service difference over time.

Tenant `light` sends a cheap workflow and tenant `heavy` an expensive one at the same request rate
(default: SD3 and Flux1-Dev on 4 GPUs, as Fig. 9-right),
both above what the GPUs can serve, so both stay backlogged. Service is vTime, as in the paper's bound:
the GPU time each tenant's invocations use (loading included), charged at dispatch and corrected at
completion; the GPU time of finished invocations lags it by the work in flight.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cluster.sim.results import SimResult
from cluster.sim.simulator import SimConfig, simulate
from cluster.sim.traces import TraceRequest
from cluster.sim.workflows import catalogue, library

TENANTS = ("light", "heavy")


@dataclass(frozen=True)
class FairnessCase:
    policy: str
    delta: float = 0.0
    gpus: int = 4
    rate_each: float = 2.0
    duration_s: float = 60.0
    light: str = "sd3"
    heavy: str = "flux1-dev"
    seed: int = 0

    @property
    def label(self) -> str:
        return f"vTime (slack {self.delta:g} s)" if self.policy == "vtime" else self.policy.upper()


def two_tenant_trace(case: FairnessCase) -> list[TraceRequest]:
    rng = np.random.default_rng(case.seed)
    out = []
    for tenant, wf in zip(TENANTS, (case.light, case.heavy)):
        t = np.cumsum(rng.exponential(1.0 / case.rate_each, size=int(case.rate_each * case.duration_s * 2) + 10))
        out += [TraceRequest(float(x), tenant, wf) for x in t[t < case.duration_s]]
    out.sort(key=lambda r: r.time)
    return out


def run_case(case: FairnessCase) -> SimResult:
    _, profiles = catalogue("s2")
    lib = library()
    workflows = [lib[case.light], lib[case.heavy]]
    cfg = SimConfig(
        gpus=case.gpus,
        system="ours",
        policy=case.policy,
        delta=case.delta,
        horizon_s=case.duration_s,
        record_service=True,
    )
    return simulate(cfg, two_tenant_trace(case), workflows, profiles)


def service_gap(result: SimResult, times: np.ndarray) -> np.ndarray:
    """GPU time of the finished invocations of `light` minus `heavy` at each time, in GPU-seconds."""
    return result.service(TENANTS, times)


def vtime_gap(result: SimResult, times: np.ndarray) -> np.ndarray:
    """v_light(t) - v_heavy(t): the paper's W_u(0, t) is tenant u's vTime (charged at dispatch, corrected
    to the measured GPU time at completion), the quantity its bound is on."""
    at, gap = result.vtime_gap(TENANTS)
    idx = np.searchsorted(at, times, side="right") - 1
    return np.where(idx >= 0, gap[np.clip(idx, 0, None)], 0.0) if len(at) else np.zeros(len(times))


def bound(result: SimResult, delta: float) -> float:
    """2 (Δ + L_max): the paper's bound on the service gap of two eligible-backlogged tenants."""
    return 2 * (delta + result.max_charge())
