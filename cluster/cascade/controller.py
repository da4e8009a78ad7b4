"""The cascade controller: it measures every `tick_s` and turns what it measured into a new allocation
every `period_s`, or at once when the allocation in force stops fitting the measurements.

Per cascade it keeps the demand (EWMA of arrivals per second, and the EWM variance of the per-tick
rates), per stage the in-system count (sampled each tick, EWMA) and the arrival rate, from which
Little's law gives the queueing delay (W = L / lambda, minus the service time), the latency per
batch size (`LatencyProfile`), and f(t) from the discriminator's recent confidences (`DeferralCurve`).
It then solves DiffServe's allocation (`allocation.allocate`) with the cascade's share of the
executor budget. The decision sets the threshold the node applies, the batch size per stage and the
executors that keep each model warm; listeners registered with `on_decision` (the cluster's
per-model scaling) receive it.

Rising load is where a periodic controller fails: between two solves the old, higher threshold keeps
sending the heavy stage more than it can serve, and the backlog it builds outlives the next solve.
So the controller plans for the upper confidence bound of the demand (EWMA + z standard errors,
times the policy's headroom), prices the wait for a running batch into the latency constraint
(`batch_wait`), and on every tick re-checks the decision in force against the fresh measurements
(`allocation.holds`): a demand or queue spike that breaks a capacity or latency constraint triggers a
solve within one tick instead of at the end of the period. Falling load only waits for the period,
so the threshold does not flap on noise.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from cluster.cascade.allocation import Allocation, Problem, allocate, holds
from cluster.cascade.deferral import DeferralCurve
from cluster.cascade.head_hook import batch_size_listener
from cluster.cascade.profiles import LatencyProfile
from cluster.cascade.spec import CascadeSpec

STAGES = ("light", "heavy")


@dataclass
class StageState:
    latency: LatencyProfile = field(default_factory=LatencyProfile)
    inflight: int = 0  # queries in this stage now (waiting or running)
    arrivals: int = 0  # since the last tick
    queue_len: float = 0.0  # EWMA of `inflight` at ticks
    rate: float = 0.0  # EWMA arrivals per second
    departures: int = 0  # since the last tick
    drain_rate: float = 0.0  # EWMA departures per second
    served: int = 0

    def queueing_delay(self, batch: int) -> float:
        """Little's law: time in stage = L / lambda; queueing is that minus the service time.

        lambda is the larger of the arrival and departure rates: after a stage stops receiving
        queries its backlog still drains, and dividing by the vanishing arrival rate alone would
        report an unbounded wait that keeps the stage from ever being used again. L is the larger of
        the EWMA and the count now, so a backlog that has just formed counts at once."""
        rate = max(self.rate, self.drain_rate)
        if rate <= 1e-9:
            return 0.0
        return max(0.0, max(self.queue_len, self.inflight) / rate - self.latency.latency(batch))


@dataclass
class CascadeState:
    spec: CascadeSpec
    curve: DeferralCurve = field(default_factory=DeferralCurve)
    stages: dict[str, StageState] = field(default_factory=lambda: {s: StageState() for s in STAGES})
    arrivals: int = 0
    demand: float = 0.0  # EWMA arrivals per second
    demand_var: float = 0.0  # EWM variance of the per-tick arrival rates
    planned_demand: float = 0.0  # the demand the decision in force was solved for
    solved_at: float = -math.inf
    solves: dict[str, int] = field(default_factory=dict)  # by reason: first, spike, degraded, period, ...
    queries: int = 0
    answered: dict[str, int] = field(default_factory=lambda: {s: 0 for s in STAGES})
    decision: Allocation | None = None
    history: deque = field(default_factory=lambda: deque(maxlen=120))


class CascadeController:
    """`tick_s`: measurement interval (DiffServe: 1 s); `period_s`: solve interval when nothing breaks
    the decision in force (DiffServe: 5 s); `alpha`: EWMA weight of a new tick; `confidence_z`: the
    standard errors of the demand EWMA planned for on top of it; `batch_wait`: the fraction of a
    batch's latency a query is expected to wait for a running batch before its own starts."""

    def __init__(
        self,
        budget: int = 1,
        period_s: float = 5.0,
        alpha: float = 0.4,
        solver: str = "milp",
        clock: Callable[[], float] = time.monotonic,
        tick_s: float = 1.0,
        confidence_z: float = 1.0,
        batch_wait: float = 0.25,
    ) -> None:
        self.budget = budget
        self.period_s = period_s
        self.tick_s = tick_s
        self.alpha = alpha
        self.confidence_z = confidence_z
        self.batch_wait = batch_wait
        self.solver = solver
        self.clock = clock
        self.cascades: dict[str, CascadeState] = {}
        self.ticks = 0
        self.solves = 0
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

    def maybe_tick(self) -> dict[str, Allocation]:
        """Measure when a tick is due; then solve when a period has passed or the decision in force no
        longer fits the measurements. Returns the new decisions (empty when none was made)."""
        with self._lock:
            now = self.clock()
            if now - self._last_tick < self.tick_s:
                return {}
            self._measure_all(now)
            shares = self._budget_shares()
            reasons = {name: self._due(state, shares[name], now) for name, state in self.cascades.items()}
            if not any(reasons.values()):
                return {}
            # One cascade's re-solve moves the budget shares, so all are solved together.
            decisions = {
                name: self._solve(state, shares[name], now, reasons[name] or "rebalance")
                for name, state in self.cascades.items()
            }
        self._notify(decisions)
        return decisions

    def tick(self) -> dict[str, Allocation]:
        """Measure now and solve every cascade's allocation, due or not."""
        with self._lock:
            now = self.clock()
            self._measure_all(now)
            shares = self._budget_shares()
            decisions = {
                name: self._solve(state, shares[name], now, self._due(state, shares[name], now) or "forced")
                for name, state in self.cascades.items()
            }
        self._notify(decisions)
        return decisions

    def _notify(self, decisions: dict[str, Allocation]) -> None:
        for name, decision in decisions.items():
            for fn in self._listeners:
                fn(name, decision)

    def _measure_all(self, now: float) -> None:
        elapsed = max(now - self._last_tick, 1e-6)
        self._last_tick = now
        self.ticks += 1
        for state in self.cascades.values():
            self._measure(state, elapsed)

    def _ewma(self, old: float, sample: float, first: bool) -> float:
        return sample if first else old + self.alpha * (sample - old)

    def _measure(self, state: CascadeState, elapsed: float) -> None:
        first = not state.history
        rate = state.arrivals / elapsed
        # West's incremental EWM variance: var <- (1 - a)(var + a d^2), d the sample's distance to the mean.
        d = rate - state.demand
        state.demand_var = 0.0 if first else (1 - self.alpha) * (state.demand_var + self.alpha * d * d)
        state.demand = self._ewma(state.demand, rate, first)
        state.arrivals = 0
        for st in state.stages.values():
            st.rate = self._ewma(st.rate, st.arrivals / elapsed, first)
            st.drain_rate = self._ewma(st.drain_rate, st.departures / elapsed, first)
            st.queue_len = self._ewma(st.queue_len, float(st.inflight), first)
            st.arrivals = st.departures = 0

    def planning_demand(self, state: CascadeState) -> float:
        """The demand to provision for: the EWMA's upper confidence bound times the policy's headroom.
        The EWMA's standard error is the per-tick rates' deviation times sqrt(alpha / (2 - alpha))."""
        se = math.sqrt(max(state.demand_var, 0.0) * self.alpha / (2 - self.alpha))
        return (state.demand + self.confidence_z * se) * state.spec.policy.headroom

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

    def _problem(self, state: CascadeState, budget: int) -> Problem:
        spec, policy = state.spec, state.spec.policy
        grid = policy.grid()
        light, heavy = state.stages["light"], state.stages["heavy"]
        previous = state.decision
        b1 = previous.light_batch if previous else policy.batch_sizes[0]
        b2 = (previous.heavy_batch or policy.batch_sizes[0]) if previous else policy.batch_sizes[0]
        return Problem(
            light.latency.stage(policy.batch_sizes),
            heavy.latency.stage(policy.batch_sizes),
            grid,
            state.curve.curve(grid),
            self.planning_demand(state),
            spec.slo_s,
            budget,
            light.queueing_delay(b1),
            heavy.queueing_delay(b2),
            self.batch_wait,
        )

    def _due(self, state: CascadeState, budget: int, now: float) -> str:
        """Why this cascade needs a new decision now ("" when it does not)."""
        if state.decision is None:
            return "first"
        if state.decision.status != "optimal":
            return "degraded"  # nothing fitted last time: try again each tick
        if not holds(self._problem(state, budget), state.decision):
            return "spike"  # demand, queueing or f(t) outgrew the decision in force
        if now - state.solved_at >= self.period_s:
            return "period"
        return ""

    def _solve(self, state: CascadeState, budget: int, now: float, reason: str) -> Allocation:
        problem = self._problem(state, budget)
        state.decision = allocate(problem, self.solver)
        state.planned_demand = problem.demand
        state.solved_at = now
        state.solves[reason] = state.solves.get(reason, 0) + 1
        self.solves += 1
        state.history.append(
            (round(now, 3), round(state.demand, 4), state.decision.threshold, state.decision.status, reason)
        )
        return state.decision

    # running in the background ---------------------------------------------------------------------
    def start(self) -> CascadeController:
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
        while not self._stop.wait(self.tick_s):
            self.maybe_tick()

    # reporting -------------------------------------------------------------------------------------
    def stats(self) -> dict:
        with self._lock:
            return {
                "budget": self.budget,
                "period_s": self.period_s,
                "tick_s": self.tick_s,
                "ticks": self.ticks,
                "solves": self.solves,
                "solver": self.solver,
                "confidence_z": self.confidence_z,
                "batch_wait": self.batch_wait,
                "cascades": {name: _state_stats(s) for name, s in self.cascades.items()},
            }


def _state_stats(s: CascadeState) -> dict:
    spec = s.spec
    return {
        "light": {"checkpoint": spec.light.checkpoint, "steps": spec.light.steps},
        "heavy": {"checkpoint": spec.heavy.checkpoint, "steps": spec.heavy.steps},
        "discriminator": spec.discriminator,
        "slo_s": spec.slo_s if spec.slo_s != float("inf") else None,
        "adaptive": spec.policy.adaptive,
        "source": spec.source,
        "demand_qps": round(s.demand, 4),
        "planned_qps": round(s.planned_demand, 4),
        "solves": dict(s.solves),
        "queries": s.queries,
        "answered": dict(s.answered),
        "confidences_seen": len(s.curve),
        "decision": None if s.decision is None else s.decision.as_dict(),
        "stages": {
            name: {
                "inflight": st.inflight,
                "queue_len": round(st.queue_len, 3),
                "rate": round(st.rate, 4),
                "drain_rate": round(st.drain_rate, 4),
                "served": st.served,
                "latency_s": {b: round(v, 4) for b, v in st.latency.measured.items()},
            }
            for name, st in s.stages.items()
        },
    }


_default: CascadeController | None = None
_default_lock = threading.Lock()


def default_controller() -> CascadeController:
    """The process's controller (the head's, when serving): nodes report to it and read thresholds."""
    global _default
    with _default_lock:
        if _default is None:
            _default = CascadeController()
            _default.on_decision(batch_size_listener(_default))  # batch sizes reach the serving head
        return _default


def set_default_controller(controller: CascadeController | None) -> None:
    global _default
    with _default_lock:
        _default = controller
