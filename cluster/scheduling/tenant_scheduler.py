"""Which ready invocation runs next, and where: the two-layer vTime scheduler (ServerlessT2I,
Algorithm 1) and the FIFO / SJF / VTC baselines, all with O(log n) decisions.

Accounting is common to every policy: each tenant has a cumulative vTime, its service divided by its
weight. A dispatch charges the estimated execution time, plus the expected load when placement puts it
on an executor without its weights (`revise_charge`); the completion corrects it to the measured time;
a dispatch lost with its executor is refunded and queued again. A tenant that arrives, or
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

Batching (cluster.scheduling.batching): `take` dispatches a chosen ready invocation out of turn, to join the batch
of the one just popped; the dispatcher takes only invocations of tenants layer 1 `admits`. It is charged like a pop; its heap entry goes stale (each entry carries the
invocation's token, bumped by `take` and `push`) and is dropped when it reaches the top.
"""

from __future__ import annotations

import heapq
import itertools
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from cluster.scheduling.scaling import displacement
from cluster.scheduling.treap import Treap, TreapNode

# What the shell that drives the scheduler attaches to an invocation to carry it out: the head's `Job`
# (the Dispatch message and the caller's future), the simulator's `SimStep` (its request and node).
PayloadT = TypeVar("PayloadT")


@dataclass(eq=False)
class Invocation(Generic[PayloadT]):
    """One ModelFn call waiting for, or holding, an executor."""

    id: int
    tenant: str
    request: str
    fn: str
    model_key: str
    estimate: float  # seconds, from the cost model
    remaining: float = 0.0  # critical-path seconds of the request after this one
    arrival: float | None = None  # clock() when it became ready; kept across re-runs
    input_bytes: dict[str, int] = field(default_factory=dict)  # producer executor id -> bytes
    input_hosts: dict[str, int] = field(default_factory=dict)  # producer host -> bytes
    transfer_s: dict[str, float] = field(default_factory=dict)  # executor id -> seconds its inputs take
    # to cross from other hosts (set by the shell before placement)
    payload: PayloadT | None = None  # what the shell needs to carry it out (PayloadT above)
    charged: float = 0.0  # vTime charged for the current dispatch (before weighting)
    seq: int = 0
    cancelled: bool = False
    deadline: float | None = None  # with load shedding on (Dispatcher.shed_run_s), dropped unstarted
    # when it cannot finish by then; None: never shed
    batch_key: str | None = None  # equal keys can run as one batch (cluster.scheduling.batching); None: alone
    batch_size: int = 1  # samples, counted against the model's batch-size cap
    spread: bool = False  # runs at once beside another call: never parked for a busy holder (warm wait)
    token: int = 0  # which ready-structure entry is current (see `take`)


@dataclass(eq=False)
class TenantAccount:
    """A tenant as the scheduler accounts for it: its weight, vTime, work queued and running, and where it
    sits in the scheduler's structures (the tenant a server knows is comfy_bridge.tenancy's `Tenant`)."""

    name: str
    order: int
    weight: float = 1.0
    vtime: float = 0.0
    queued: int = 0
    running: int = 0
    ready: list = field(default_factory=list)  # heap of (key, seq, Invocation, token)
    idle_since: float | None = None  # None: never seen
    node: TreapNode | None = None  # in the backlogged treap
    in_active: bool = False  # has a current entry in the active-vTime heap
    active_stamp: int = -1  # which heap entry is current (older ones are stale)

    @property
    def active(self) -> bool:
        return self.queued + self.running > 0


# --- policies ---


class Scheduler(ABC):
    """Holds ready invocations and the per-tenant accounting; `pop` is one scheduling decision."""

    charges_time = True  # False: service is counted in invocations, so there is nothing to correct

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, lift_grace_s: float = 1.0, lift: bool = True
    ) -> None:
        self.clock = clock
        self.lift_grace_s = lift_grace_s
        self.lift = lift
        self.tenants: dict[str, TenantAccount] = {}
        self._by_order: list[TenantAccount] = []
        # Active tenants by vTime, only ever asked for its minimum (the lift): a heap with lazy
        # deletion, one push per change instead of a treap removal and insertion per decision.
        self._active: list[tuple[float, int, int]] = []  # (vtime, tenant order, stamp)
        self._stamps = itertools.count()
        self._floor = 0.0  # highest least-active-vTime seen: the lift target when idle
        self._seq = itertools.count()
        self.queued = 0
        self.decisions = 0

    # accounting --------------------------------------------------------------------------------
    def tenant(self, name: str) -> TenantAccount:
        t = self.tenants.get(name)
        if t is None:
            t = self.tenants[name] = TenantAccount(name, len(self._by_order))
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

    def _attach(self, t: TenantAccount) -> None:
        """Bring the tenant's entries up to date: a fresh active-heap entry if its old one went stale
        (its vTime changed) and it is active, and its place in the policy's ready structures."""
        if not t.in_active and t.queued + t.running > 0:
            t.in_active = True
            t.active_stamp = next(self._stamps)
            heapq.heappush(self._active, (t.vtime, t.order, t.active_stamp))
            if len(self._active) > 2 * len(self._by_order) + 64:  # amortised O(1): stale entries
                self._compact_active()
        self._place(t)

    def _place(self, t: TenantAccount) -> None:
        """Policies that rank tenants keep each backlogged tenant's vTime and best ready key in
        their own structure; called after either may have changed."""

    def _charge(self, inv: Invocation) -> float:
        return inv.estimate

    def _became_active(self, t: TenantAccount) -> None:
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
            if t.queued + t.running == 0:
                self._became_active(t)  # an idle tenant has no entry anywhere: nothing goes stale
        t.queued += 1
        self.queued += 1
        inv.token += 1
        self._enqueue(t, inv)
        self._attach(t)

    def pop(self) -> Invocation | None:
        """One decision: the invocation to dispatch now, charged to its tenant; None when idle."""
        while True:
            inv = self._select()
            if inv is None:
                return None
            t = self.tenants[inv.tenant]
            t.queued -= 1
            self.queued -= 1
            if inv.cancelled:
                self._place(t)
                self._idle_check(t)
                continue
            self._start(t, inv)
            self.decisions += 1
            return inv

    def take(self, inv: Invocation) -> None:
        """Dispatch a ready (queued, not cancelled) invocation out of turn, charged like `pop`: it
        joins a batch with the invocation just popped."""
        t = self.tenants[inv.tenant]
        t.queued -= 1
        self.queued -= 1
        inv.token += 1  # its entry in the ready structures is now stale
        self._start(t, inv)

    def admits(self, tenant: str) -> bool:
        """Whether the tenant's ready invocations may be dispatched now, out of turn too (`take`, to join a
        batch): the policies without a fairness layer admit everyone."""
        return True

    def _start(self, t: TenantAccount, inv: Invocation) -> None:
        inv.charged = self._charge(inv)
        t.vtime += inv.charged / t.weight
        t.in_active = False
        t.running += 1
        self._attach(t)

    def revise_charge(self, inv: Invocation, charge: float) -> None:
        """A dispatched invocation is now expected to cost `charge` seconds (placement put it on an
        executor that must load its weights first): charge that instead of the estimate. Loading is
        GPU time the tenant uses, and charging it at dispatch rather than at completion keeps the gap
        between two backlogged tenants within Δ + L_max while several loads run at once."""
        self._recharge(self.tenants[inv.tenant], inv, charge)
        self._attach(self.tenants[inv.tenant])

    def complete(self, inv: Invocation, measured: float | None) -> None:
        """The dispatch finished (or failed): correct the charge to the measured time."""
        t = self.tenants[inv.tenant]
        if measured is not None:
            self._recharge(t, inv, measured)
        t.running -= 1
        self._attach(t)
        self._idle_check(t)

    def _recharge(self, t: TenantAccount, inv: Invocation, charge: float) -> None:
        if self.charges_time and charge != inv.charged:
            t.vtime += (charge - inv.charged) / t.weight
            t.in_active = False
            inv.charged = charge

    def requeue(self, inv: Invocation) -> None:
        """The dispatch was lost with its executor: refund it and make it ready again."""
        t = self.tenants[inv.tenant]
        t.vtime -= inv.charged / t.weight
        t.in_active = False
        inv.charged = 0.0
        t.running -= 1
        self.push(inv, requeue=True)

    def cancel(self, invs: Iterable[Invocation]) -> None:
        """Drop queued invocations (their request failed); they are skipped when reached."""
        for inv in invs:
            inv.cancelled = True

    def _idle_check(self, t: TenantAccount) -> None:
        if t.queued + t.running == 0:
            t.in_active = False
            t.idle_since = self.clock()

    def __len__(self) -> int:
        return self.queued

    @abstractmethod
    def _enqueue(self, t: TenantAccount, inv: Invocation) -> None: ...

    @abstractmethod
    def _select(self) -> Invocation | None:
        """Remove and return the next invocation from the ready structures (cancelled ones included);
        pop() then charges its tenant and calls `_place`."""


class FairScheduler(Scheduler):
    """The two-layer vTime scheduler; with `charge_count=True, delta=0` and FIFO order inside a
    tenant it is VTC adapted to ModelFn invocations (service counted in operations, not time)."""

    def __init__(
        self,
        delta: float = 1.0,
        *,
        w_wait: float = 1.0,
        w_remaining: float = 1.0,
        w_exec: float = 1.0,
        charge_count: bool = False,
        fifo_within: bool = False,
        **kw: Any,
    ) -> None:
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

    def _enqueue(self, t: TenantAccount, inv: Invocation) -> None:
        heapq.heappush(t.ready, (self._key(inv), inv.seq, inv, inv.token))

    def _place(self, t: TenantAccount) -> None:
        node, tree = t.node, self._backlogged
        while t.ready and _stale(t.ready[0]):  # taken for a batch: the head key must be a live entry
            heapq.heappop(t.ready)
        if not t.ready:
            if node is not None:
                tree.unlink(node)
                t.node = None
            return
        key, val = (t.vtime, t.order), t.ready[0][:2]
        if node is None:
            t.node = tree.insert(key, val, t)
        elif node.key != key:
            node.own = (val, t.order)
            tree.rekey(node, key)
        elif node.own[0] != val:
            tree.set_val(node, val)

    def _select(self) -> Invocation | None:
        first = self._backlogged.first()
        if first is None:
            return None
        best = self._backlogged.best_below(first.key[0] + self.delta)  # layer 1, then layer 2
        return heapq.heappop(self._by_order[best[1]].ready)[2]

    def admits(self, tenant: str) -> bool:
        """Layer 1 for invocations taken out of turn: the tenant's vTime is within `delta` of the least-served
        active tenant's (the one whose step leads the batch is running, no longer backlogged). A batch takes
        only admitted tenants' invocations, so riding along in others' batches never lets a tenant overtake
        its share."""
        least = self._min_active()
        return least is None or self.tenant(tenant).vtime <= least + self.delta

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

    def _enqueue(self, t: TenantAccount, inv: Invocation) -> None:
        key = inv.estimate if self.shortest_first else 0.0
        heapq.heappush(self._heap, (key, inv.seq, inv, inv.token))

    def _select(self) -> Invocation | None:
        while self._heap:
            entry = heapq.heappop(self._heap)
            if not _stale(entry):
                return entry[2]
        return None


def _stale(entry: tuple) -> bool:
    """A ready-structure entry of an invocation taken for a batch (or re-queued since)."""
    return entry[3] != entry[2].token


# --- placement ---


class PlacementTarget(Protocol):
    """What placement reads of an executor (the dispatch policy's fuller view is
    cluster.scheduling.interface.ExecutorView)."""

    id: str
    cached_models: set[str]

    @property
    def load(self) -> int: ...


def place(
    inv: Invocation,
    free: Sequence[PlacementTarget],
    targets: dict[str, int] | None = None,
    replicas: dict[str, int] | None = None,
) -> PlacementTarget:
    """Best-fit executor among the free ones: holding the weights, then the least time moving inputs
    across hosts (`inv.transfer_s`: the host holding the inputs), then holding the most input bytes, then (with the scaling controller's `targets` and current `replicas`) the one where
    loading the weights would push out the fewest wanted warm copies of other models, then the
    least loaded (ties by id, so placement is reproducible)."""
    targets, replicas = targets or {}, replicas or {}
    return min(
        free,
        key=lambda e: (
            inv.model_key not in e.cached_models,
            inv.transfer_s.get(e.id, 0.0),
            -inv.input_bytes.get(e.id, 0),
            displacement(e, inv.model_key, targets, replicas) if targets else 0,
            e.load,
            e.id,
        ),
    )
