"""Which ready invocation runs next, and where: the two-layer vTime scheduler (ServerlessT2I,
Algorithm 1) and the FIFO / SJF / VTC baselines, all with O(log n) decisions.

Accounting is common to every policy: each tenant has a cumulative vTime, its service divided by its
weight. A dispatch charges the estimated execution time; the completion corrects it to the measured
time; a dispatch lost with its executor is refunded and queued again. A tenant that arrives, or
returns after being idle longer than `lift_grace_s`, is lifted to the least vTime among active
tenants (never below the highest such minimum seen, so a tenant cannot bank credit while the whole
cluster is idle either).

vTime policy:
  layer 1 admits the tenants whose vTime is within `delta` of the least-served backlogged tenant;
  layer 2 picks, among their ready invocations, the highest w(n) - r(n) - e(n): waiting time minus
  remaining critical-path time minus execution time. All three are seconds and each has a fixed
  weight (the normalisation), so maximising it is minimising `arrival + r + e`, a key that does not
  change while the invocation waits. That is what lets each tenant keep its ready set in a heap, and
  the backlogged tenants live in a treap ordered by vTime and augmented with the best head key of
  each subtree: one decision is a split at `vmin + delta`, a subtree minimum and a merge.
"""
from __future__ import annotations

import heapq
import itertools
import random
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Protocol, Sequence

from cluster.scaling import displacement

POLICIES = ("vtime", "fifo", "sjf", "vtc")


@dataclass(eq=False)
class Invocation:
    """One ModelFn call waiting for, or holding, an executor."""
    id: int
    tenant: str
    request: str
    fn: str
    model_key: str
    estimate: float                     # seconds, from the cost model
    remaining: float = 0.0              # critical-path seconds of the request after this one
    arrival: float | None = None        # clock() when it became ready; kept across re-runs
    input_bytes: dict[str, int] = field(default_factory=dict)  # producer executor id -> bytes
    payload: Any = None                 # what the head needs to dispatch it
    charged: float = 0.0                # vTime charged for the current dispatch (before weighting)
    seq: int = 0
    cancelled: bool = False


@dataclass(eq=False)
class Tenant:
    name: str
    order: int
    weight: float = 1.0
    vtime: float = 0.0
    queued: int = 0
    running: int = 0
    ready: list = field(default_factory=list)   # heap of (key, seq, Invocation)
    idle_since: float | None = None             # None: never seen
    node: "_Node | None" = None                 # in the backlogged treap
    in_active: bool = False                     # has a current entry in the active-vTime heap
    active_stamp: int = -1                      # which heap entry is current (older ones are stale)

    @property
    def active(self) -> bool:
        return self.queued + self.running > 0


# --- treap keyed by (vtime, tenant order), augmented with the minimum head key of each subtree ---

class _Node:
    __slots__ = ("key", "prio", "left", "right", "val", "tenant", "best")

    def __init__(self, key: tuple, val: tuple, tenant: Tenant, prio: float) -> None:
        self.key, self.val, self.tenant, self.prio = key, val, tenant, prio
        self.left = self.right = None
        self.best: tuple = (val, tenant.order)


def _best(n: _Node | None) -> tuple | None:
    return None if n is None else n.best


def _pull(n: _Node) -> None:
    b = (n.val, n.tenant.order)
    for child in (n.left, n.right):
        if child is not None and child.best < b:
            b = child.best
    n.best = b


def _split(t: _Node | None, key: tuple) -> tuple[_Node | None, _Node | None]:
    """(keys < key, keys >= key)."""
    if t is None:
        return None, None
    if t.key < key:
        left, right = _split(t.right, key)
        t.right = left
        _pull(t)
        return t, right
    left, right = _split(t.left, key)
    t.left = right
    _pull(t)
    return left, t


def _merge(a: _Node | None, b: _Node | None) -> _Node | None:
    if a is None:
        return b
    if b is None:
        return a
    if a.prio > b.prio:
        a.right = _merge(a.right, b)
        _pull(a)
        return a
    b.left = _merge(a, b.left)
    _pull(b)
    return b


class Treap:
    def __init__(self, seed: int = 0) -> None:
        self.root: _Node | None = None
        self._rng = random.Random(seed)
        self.size = 0

    def insert(self, key: tuple, val: tuple, tenant: Tenant) -> _Node:
        node = _Node(key, val, tenant, self._rng.random())
        left, right = _split(self.root, key)
        self.root = _merge(_merge(left, node), right)
        self.size += 1
        return node

    def remove(self, key: tuple) -> None:
        left, rest = _split(self.root, key)
        _, right = _split(rest, (key[0], key[1] + 0.5))  # tenant orders are integers
        self.root = _merge(left, right)
        self.size -= 1

    def first(self) -> _Node | None:
        n = self.root
        while n is not None and n.left is not None:
            n = n.left
        return n

    def best_below(self, limit: float) -> tuple | None:
        """The smallest (val, order) among nodes whose vtime <= limit."""
        left, right = _split(self.root, (limit, float("inf")))
        best = _best(left)
        self.root = _merge(left, right)
        return best

    def depth(self) -> int:
        def d(n: _Node | None) -> int:
            return 0 if n is None else 1 + max(d(n.left), d(n.right))
        return d(self.root)


# --- policies ---

class Scheduler(ABC):
    """Holds ready invocations and the per-tenant accounting; `pop` is one scheduling decision."""

    charges_time = True     # False: service is counted in invocations, so there is nothing to correct

    def __init__(self, clock: Callable[[], float] = time.monotonic, lift_grace_s: float = 1.0,
                 lift: bool = True) -> None:
        self.clock = clock
        self.lift_grace_s = lift_grace_s
        self.lift = lift
        self.tenants: dict[str, Tenant] = {}
        self._by_order: list[Tenant] = []
        # Active tenants by vTime, only ever asked for its minimum (the lift): a heap with lazy
        # deletion, one push per change instead of a treap removal and insertion per decision.
        self._active: list[tuple[float, int, int]] = []   # (vtime, tenant order, stamp)
        self._stamps = itertools.count()
        self._floor = 0.0                   # highest least-active-vTime seen: the lift target when idle
        self._seq = itertools.count()
        self.queued = 0
        self.decisions = 0

    # accounting --------------------------------------------------------------------------------
    def tenant(self, name: str) -> Tenant:
        t = self.tenants.get(name)
        if t is None:
            t = self.tenants[name] = Tenant(name, len(self._by_order))
            self._by_order.append(t)
        return t

    def set_weight(self, name: str, weight: float) -> None:
        if weight <= 0:
            raise ValueError("tenant weight must be positive")
        self.tenant(name).weight = weight

    def _min_active(self) -> float | None:
        heap = self._active
        while heap:
            v, order, stamp = heap[0]
            t = self._by_order[order]
            if t.in_active and t.active_stamp == stamp:
                self._floor = max(self._floor, v)
                return v
            heapq.heappop(heap)
        return None

    def _compact_active(self) -> None:
        self._active = [(t.vtime, t.order, t.active_stamp) for t in self._by_order if t.in_active]
        heapq.heapify(self._active)

    def _set_vtime(self, t: Tenant, v: float) -> None:
        self._detach(t)
        t.vtime = v
        self._attach(t)

    def _attach(self, t: Tenant) -> None:
        if t.active and not t.in_active:
            t.in_active = True
            t.active_stamp = next(self._stamps)
            heapq.heappush(self._active, (t.vtime, t.order, t.active_stamp))
            if len(self._active) > 2 * len(self._by_order) + 64:   # amortised O(1): stale entries
                self._compact_active()
        self._attach_ready(t)

    def _detach(self, t: Tenant) -> None:
        t.in_active = False
        self._detach_ready(t)

    def _attach_ready(self, t: Tenant) -> None:
        """Policies that rank tenants keep backlogged tenants in their own structure."""

    def _keeps_order(self, t: Tenant, inv: Invocation) -> bool:
        """Whether queueing `inv` leaves the tenant's place in the policy's structures unchanged."""
        return True

    def _detach_ready(self, t: Tenant) -> None:
        pass

    def _charge(self, inv: Invocation) -> float:
        return inv.estimate

    def _became_active(self, t: Tenant) -> None:
        returning = t.idle_since is None or self.clock() - t.idle_since > self.lift_grace_s
        if self.lift and returning:
            m = self._min_active()
            target = self._floor if m is None else m
            if t.vtime < target:
                t.vtime = target

    def push(self, inv: Invocation, requeue: bool = False) -> None:
        """Make `inv` ready (vTime lift first when its tenant arrives or returns)."""
        t = self.tenant(inv.tenant)
        if not requeue:
            inv.seq = next(self._seq)
            if inv.arrival is None:
                inv.arrival = self.clock()
        if t.active and self._keeps_order(t, inv):
            # no lift, no change of vTime or of the tenant's best ready key: no structure to update
            t.queued += 1
            self.queued += 1
            self._enqueue(t, inv)
            return
        self._detach(t)
        if not t.active and not requeue:
            self._became_active(t)
        t.queued += 1
        self.queued += 1
        self._enqueue(t, inv)
        self._attach(t)

    def pop(self) -> Invocation | None:
        """One decision: the invocation to dispatch now, charged to its tenant; None when idle."""
        while True:
            inv = self._select()
            if inv is None:
                return None
            t = self.tenants[inv.tenant]
            self._detach(t)
            t.queued -= 1
            self.queued -= 1
            if inv.cancelled:
                self._attach(t)
                self._idle_check(t)
                continue
            inv.charged = self._charge(inv)
            t.vtime += inv.charged / t.weight
            t.running += 1
            self._attach(t)
            self.decisions += 1
            return inv

    def complete(self, inv: Invocation, measured: float | None) -> None:
        """The dispatch finished (or failed): correct the charge to the measured time."""
        t = self.tenants[inv.tenant]
        self._detach(t)
        if measured is not None and self.charges_time:
            t.vtime += (measured - inv.charged) / t.weight
            inv.charged = measured
        t.running -= 1
        self._attach(t)
        self._idle_check(t)

    def requeue(self, inv: Invocation) -> None:
        """The dispatch was lost with its executor: refund it and make it ready again."""
        t = self.tenants[inv.tenant]
        self._detach(t)
        t.vtime -= inv.charged / t.weight
        inv.charged = 0.0
        t.running -= 1
        self._attach(t)
        self.push(inv, requeue=True)

    def cancel(self, invs: Iterable[Invocation]) -> None:
        """Drop queued invocations (their request failed); they are skipped when reached."""
        for inv in invs:
            inv.cancelled = True

    def _idle_check(self, t: Tenant) -> None:
        if not t.active:
            self._detach(t)
            t.idle_since = self.clock()

    def __len__(self) -> int:
        return self.queued

    @abstractmethod
    def _enqueue(self, t: Tenant, inv: Invocation) -> None: ...

    @abstractmethod
    def _select(self) -> Invocation | None:
        """Remove and return the next invocation from the ready structures (cancelled ones included);
        its tenant may be left detached, pop() detaches and re-attaches it."""


class FairScheduler(Scheduler):
    """The two-layer vTime scheduler; with `charge_count=True, delta=0` and FIFO order inside a
    tenant it is VTC adapted to ModelFn invocations (service counted in operations, not time)."""

    def __init__(self, delta: float = 1.0, *, w_wait: float = 1.0, w_remaining: float = 1.0,
                 w_exec: float = 1.0, charge_count: bool = False, fifo_within: bool = False,
                 **kw: Any) -> None:
        super().__init__(**kw)
        self.delta = delta
        self.w_wait, self.w_remaining, self.w_exec = w_wait, w_remaining, w_exec
        self.charge_count = charge_count
        self.charges_time = not charge_count
        self.fifo_within = fifo_within
        self._backlogged = Treap(seed=2)

    def _charge(self, inv: Invocation) -> float:
        return 1.0 if self.charge_count else inv.estimate

    def _key(self, inv: Invocation) -> float:
        if self.fifo_within:
            return float(inv.seq)
        assert inv.arrival is not None
        # max  w_wait*(now - arrival) - w_rem*r - w_exec*e   <=>   min  w_wait*arrival + w_rem*r + w_exec*e
        return self.w_wait * inv.arrival + self.w_remaining * inv.remaining + self.w_exec * inv.estimate

    def _enqueue(self, t: Tenant, inv: Invocation) -> None:
        heapq.heappush(t.ready, (self._key(inv), inv.seq, inv))

    def _keeps_order(self, t: Tenant, inv: Invocation) -> bool:
        return t.node is not None and (self._key(inv), inv.seq) > t.ready[0][:2]

    def _attach_ready(self, t: Tenant) -> None:
        if t.ready and t.node is None:
            t.node = self._backlogged.insert((t.vtime, t.order), t.ready[0][:2], t)

    def _detach_ready(self, t: Tenant) -> None:
        if t.node is not None:
            self._backlogged.remove(t.node.key)
            t.node = None

    def _select(self) -> Invocation | None:
        first = self._backlogged.first()
        if first is None:
            return None
        best = self._backlogged.best_below(first.key[0] + self.delta)   # layer 1, then layer 2
        t = self._by_order[best[1]]
        self._detach_ready(t)
        _, _, inv = heapq.heappop(t.ready)
        return inv   # pop() re-attaches the tenant once its vTime is charged: one treap update, not two

    def candidates(self) -> list[str]:
        """Layer 1's candidate set (for stats and tests; O(|C|))."""
        first = self._backlogged.first()
        if first is None:
            return []
        limit = first.key[0] + self.delta
        return sorted(t.name for t in self.tenants.values() if t.node is not None and t.vtime <= limit)


class QueueScheduler(Scheduler):
    """One global heap: FIFO (arrival order) or SJF (shortest estimate first)."""

    def __init__(self, shortest_first: bool = False, **kw: Any) -> None:
        super().__init__(**kw)
        self.shortest_first = shortest_first
        self._heap: list = []

    def _enqueue(self, t: Tenant, inv: Invocation) -> None:
        key = inv.estimate if self.shortest_first else 0.0
        heapq.heappush(self._heap, (key, inv.seq, inv))

    def _select(self) -> Invocation | None:
        return heapq.heappop(self._heap)[2] if self._heap else None


def make_scheduler(policy: str = "vtime", delta: float = 1.0, **kw: Any) -> Scheduler:
    if policy == "vtime":
        return FairScheduler(delta, **kw)
    if policy == "vtc":
        return FairScheduler(0.0, charge_count=True, fifo_within=True, **kw)
    if policy == "fifo":
        return QueueScheduler(**kw)
    if policy == "sjf":
        return QueueScheduler(shortest_first=True, **kw)
    raise ValueError(f"unknown policy {policy!r}; choose one of {POLICIES}")


# --- placement ---

class ExecutorView(Protocol):
    id: str
    cached_models: set[str]

    @property
    def load(self) -> int: ...


def place(inv: Invocation, free: Sequence[ExecutorView], targets: dict[str, int] | None = None,
          replicas: dict[str, int] | None = None) -> ExecutorView:
    """Best-fit executor among the free ones: holding the weights, then holding the most input
    bytes, then (with the scaling controller's `targets` and current `replicas`) the one where
    loading the weights would push out the fewest wanted warm copies of other models, then the
    least loaded (ties by id, so placement is reproducible)."""
    targets, replicas = targets or {}, replicas or {}
    return min(free, key=lambda e: (inv.model_key not in e.cached_models,
                                    -inv.input_bytes.get(e.id, 0),
                                    displacement(e, inv.model_key, targets, replicas) if targets else 0,
                                    e.load, e.id))
