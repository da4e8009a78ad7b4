"""The cascade controller: every `period_s` it turns what it measured into a new allocation.

Per cascade it keeps the demand (EWMA of arrivals per second), per stage the in-system count
(sampled each tick, EWMA) and the arrival rate, from which Little's law gives the queueing delay
(W = L / lambda, minus the service time), the latency per batch size (`LatencyProfile`), and f(t)
from the discriminator's recent confidences (`DeferralCurve`). It then solves DiffServe's allocation
(`allocation.allocate`) with the cascade's share of the executor budget. The decision sets the
threshold the node applies, the batch size per stage and the executors that keep each model warm;
listeners registered with `on_decision` (the cluster's per-model scaling) receive it.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

from cluster.cascade.allocation import Allocation, Problem, allocate
from cluster.cascade.deferral import DeferralCurve
from cluster.cascade.profiles import LatencyProfile
from cluster.cascade.spec import CascadeSpec

STAGES = ("light", "heavy")


@dataclass
class StageState:
    latency: LatencyProfile = field(default_factory=LatencyProfile)
    inflight: int = 0              # queries in this stage now (waiting or running)
    arrivals: int = 0              # since the last tick
    queue_len: float = 0.0         # EWMA of `inflight` at ticks
    rate: float = 0.0              # EWMA arrivals per second
    departures: int = 0            # since the last tick
    drain_rate: float = 0.0        # EWMA departures per second
    served: int = 0

    def queueing_delay(self, batch: int) -> float:
        """Little's law: time in stage = L / lambda; queueing is that minus the service time.

        lambda is the larger of the arrival and departure rates: after a stage stops receiving
        queries its backlog still drains, and dividing by the vanishing arrival rate alone would
        report an unbounded wait that keeps the stage from ever being used again."""
        rate = max(self.rate, self.drain_rate)
        if rate <= 1e-9:
            return 0.0
        return max(0.0, self.queue_len / rate - self.latency.latency(batch))


@dataclass
class CascadeState:
    spec: CascadeSpec
    curve: DeferralCurve = field(default_factory=DeferralCurve)
    stages: dict[str, StageState] = field(default_factory=lambda: {s: StageState() for s in STAGES})
    arrivals: int = 0
    demand: float = 0.0
    queries: int = 0
    answered: dict[str, int] = field(default_factory=lambda: {s: 0 for s in STAGES})
    decision: Allocation | None = None
    history: deque = field(default_factory=lambda: deque(maxlen=120))


class CascadeController:
    def __init__(self, budget: int = 1, period_s: float = 5.0, alpha: float = 0.4, solver: str = "milp",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.budget = budget
        self.period_s = period_s
        self.alpha = alpha
        self.solver = solver
        self.clock = clock
        self.cascades: dict[str, CascadeState] = {}
        self.ticks = 0
        self._last_tick = clock()
        self._lock = threading.RLock()
        self._listeners: list[Callable[[str, Allocation], None]] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # declaring -------------------------------------------------------------------------------------
    def add(self, spec: CascadeSpec) -> CascadeState:
        """Declare (or re-declare, keeping measurements) a cascade."""
        with self._lock:
            state = self.cascades.get(spec.name)
            if state is None:
                state = self.cascades[spec.name] = CascadeState(spec)
            state.spec = spec
            return state

    def on_decision(self, fn: Callable[[str, Allocation], None]) -> None:
        self._listeners.append(fn)

    # measuring (called from the data path) --------------------------------------------------------
    def record_arrival(self, name: str, n: int = 1) -> None:
        with self._lock:
            state = self.cascades[name]
            state.arrivals += n
            state.queries += n
        self.maybe_tick()

    def enter(self, name: str, stage: str, n: int = 1) -> None:
        """`n` queries entered a stage (queued or running)."""
        with self._lock:
            st = self.cascades[name].stages[stage]
            st.inflight += n
            st.arrivals += n

    def leave(self, name: str, stage: str, n: int = 1, seconds: float | None = None) -> None:
        """`n` queries left a stage; `seconds` is the batch's latency when measured."""
        with self._lock:
            st = self.cascades[name].stages[stage]
            st.inflight -= n
            st.served += n
            st.departures += n
            if seconds is not None:
                st.latency.observe(n, seconds)

    @contextmanager
    def stage(self, name: str, stage: str, batch: int = 1) -> Iterator[None]:
        """Bracket one stage of one query: counts it in the stage's queue and measures its latency."""
        self.enter(name, stage, batch)
        start = self.clock()
        try:
            yield
        finally:
            self.leave(name, stage, batch, self.clock() - start)

    def record_latency(self, name: str, stage: str, batch: int, seconds: float) -> None:
        with self._lock:
            self.cascades[name].stages[stage].latency.observe(batch, seconds)

    def record_confidence(self, name: str, confidence: float, answered_by: str) -> None:
        with self._lock:
            state = self.cascades[name]
            state.curve.observe(confidence)
            state.answered[answered_by] += 1

    # deciding --------------------------------------------------------------------------------------
    def threshold(self, name: str) -> float | None:
        """The threshold the data path should apply now: static, decided, or None (no decision yet)."""
        with self._lock:
            state = self.cascades.get(name)
            if state is None:
                return None
            if not state.spec.policy.adaptive:
                return state.spec.policy.threshold
            return None if state.decision is None else state.decision.threshold

    def maybe_tick(self) -> None:
        if self.clock() - self._last_tick >= self.period_s:
            self.tick()

    def tick(self) -> dict[str, Allocation]:
        """Update the measurements and solve every cascade's allocation."""
        with self._lock:
            now = self.clock()
            elapsed = max(now - self._last_tick, 1e-6)
            self._last_tick = now
            self.ticks += 1
            for state in self.cascades.values():
                self._measure(state, elapsed)
            shares = self._budget_shares()
            decisions = {name: self._solve(state, shares[name], now) for name, state in self.cascades.items()}
        for name, decision in decisions.items():
            for fn in self._listeners:
                fn(name, decision)
        return decisions

    def _ewma(self, old: float, sample: float, first: bool) -> float:
        return sample if first else old + self.alpha * (sample - old)

    def _measure(self, state: CascadeState, elapsed: float) -> None:
        first = not state.history
        state.demand = self._ewma(state.demand, state.arrivals / elapsed, first)
        state.arrivals = 0
        for st in state.stages.values():
            st.rate = self._ewma(st.rate, st.arrivals / elapsed, first)
            st.drain_rate = self._ewma(st.drain_rate, st.departures / elapsed, first)
            st.queue_len = self._ewma(st.queue_len, float(st.inflight), first)
            st.arrivals = st.departures = 0

    def _budget_shares(self) -> dict[str, int]:
        """Split the executors among cascades in proportion to demand (largest remainder), each capped
        by its policy and given at least one when the budget allows."""
        names = list(self.cascades)
        if not names:
            return {}
        demand = {n: self.cascades[n].demand for n in names}
        total = sum(demand.values())
        raw = {n: (self.budget * demand[n] / total if total > 0 else self.budget / len(names)) for n in names}
        shares = {n: int(raw[n]) for n in names}
        for n in sorted(names, key=lambda n: raw[n] - shares[n], reverse=True)[: self.budget - sum(shares.values())]:
            shares[n] += 1
        for n in names:
            cap = self.cascades[n].spec.policy.max_executors
            shares[n] = max(1, shares[n] if cap is None else min(cap, shares[n]))
        return shares

    def _solve(self, state: CascadeState, budget: int, now: float) -> Allocation:
        spec, policy = state.spec, state.spec.policy
        grid = policy.grid()
        light, heavy = state.stages["light"], state.stages["heavy"]
        previous = state.decision
        b1 = previous.light_batch if previous else policy.batch_sizes[0]
        b2 = (previous.heavy_batch or policy.batch_sizes[0]) if previous else policy.batch_sizes[0]
        problem = Problem(light.latency.stage(policy.batch_sizes), heavy.latency.stage(policy.batch_sizes),
                          grid, state.curve.curve(grid), state.demand * policy.headroom, spec.slo_s, budget,
                          light.queueing_delay(b1), heavy.queueing_delay(b2))
        state.decision = allocate(problem, self.solver)
        state.history.append((round(now, 3), round(state.demand, 4), state.decision.threshold,
                              state.decision.status))
        return state.decision

    # running in the background ---------------------------------------------------------------------
    def start(self) -> "CascadeController":
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="cascade-controller", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.tick()

    # reporting -------------------------------------------------------------------------------------
    def stats(self) -> dict:
        with self._lock:
            return {"budget": self.budget, "period_s": self.period_s, "ticks": self.ticks, "solver": self.solver,
                    "cascades": {name: _state_stats(s) for name, s in self.cascades.items()}}


def _state_stats(s: CascadeState) -> dict:
    spec = s.spec
    return {
        "light": {"checkpoint": spec.light.checkpoint, "steps": spec.light.steps},
        "heavy": {"checkpoint": spec.heavy.checkpoint, "steps": spec.heavy.steps},
        "discriminator": spec.discriminator, "slo_s": spec.slo_s if spec.slo_s != float("inf") else None, "adaptive": spec.policy.adaptive,
        "source": spec.source, "demand_qps": round(s.demand, 4), "queries": s.queries,
        "answered": dict(s.answered), "confidences_seen": len(s.curve),
        "decision": None if s.decision is None else s.decision.as_dict(),
        "stages": {name: {"inflight": st.inflight, "queue_len": round(st.queue_len, 3), "rate": round(st.rate, 4),
                          "drain_rate": round(st.drain_rate, 4),
                          "served": st.served, "latency_s": {b: round(v, 4) for b, v in st.latency.measured.items()}}
                   for name, st in s.stages.items()},
    }


_default: CascadeController | None = None
_default_lock = threading.Lock()


def default_controller() -> CascadeController:
    """The process's controller (the head's, when serving): nodes report to it and read thresholds."""
    global _default
    with _default_lock:
        if _default is None:
            _default = CascadeController()
        return _default


def set_default_controller(controller: CascadeController | None) -> None:
    global _default
    with _default_lock:
        _default = controller
