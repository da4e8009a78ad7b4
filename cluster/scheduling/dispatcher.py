"""The one dispatch policy: which ready invocation runs where and when, for the head (cluster/control/head.py,
the ZeroMQ shell around it) and for the simulator (cluster/sim/simulator.py, the event-clock shell).
No sockets, no threads: the clock is passed in and decisions come out as `Assignment`s
(cluster.scheduling.interface states the contract).

One `schedule(now, executors)` does, in order:

- warm wait, take: free executors take parked invocations before popping new work (the scheduler
  chose those first); executors holding a parked model choose first, each takes the oldest of its
  models', and any takes one that has waited its load time (cluster.scheduling.warm_wait.pick_parked);
- batches whose window closed, or that are full, go to a free executor;
- otherwise the scheduler pops (cluster.scheduling.tenant_scheduler: vTime, FIFO, SJF, VTC); an invocation with a batch
  key whose model's cap is above its samples leads a batch: the other ready invocations with the same
  key (any tenant layer 1 admits, arrival order, up to the cap) are taken with it from an index kept on `add`,
  `requeue` and `cancel`. A batch that is not full waits up to `batch_window_s` for more (requests
  in lockstep resubmit their next steps a few milliseconds apart; without a wait the first would
  always run alone), holding one free executor for itself;
- placement (cluster.scheduling.tenant_scheduler.place with the scaling controller's targets); a single invocation
  placed on a cold executor is parked instead when a busy holder of its weights is expected to be
  free sooner than the load (cluster.scheduling.warm_wait.should_park);
- charging: a cold start is charged the load its run will include (a batch's parts by their samples),
  and an invocation placed away from the host of its inputs the time they take to cross (the shell's
  `transfer_s`);
- load shedding, an option the head leaves off: built with `shed_run_s` (seconds a run of a model's
  batch takes), an invocation with a `deadline` that a full batch started now would miss is dropped
  instead of run when it is popped or would join a batch, as DiffServe's workers drop the queries
  that cannot finish within 1.5 x SLO: running them would only delay the queries that still can.
  The shell collects the dropped ones with `take_shed` and ends their requests.

Preloading (§5.1) is decided here too, for both shells: each tells the dispatcher what demand it
learns of (`expect`: the simulator a request's models on arrival, the head each invocation queued
and each model a controller announces), and `preload_order` says which models an idle executor fills
its free memory with, the first L_e layers of each, never by evicting: the models a controller
plans replicas for (the scaling controller's floors) first, then the most expected; with no
expectation yet, every model the shell knows of. The simulator applies it to its modelled layer
caches, the head sends it to its executors (`messages.Preload`, cluster.executor.preloader).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from cluster.scheduling.interface import Assignment, DispatchPolicy, ExecutorView, LoadCosts
from cluster.scheduling.scaling import ScalingController, replica_counts
from cluster.scheduling.tenant_scheduler import Invocation, Scheduler, place
from cluster.scheduling.warm_wait import Parked, WarmWaitPolicy, pick_parked, should_park


@dataclass(eq=False)
class Batch:
    """Invocations taken to run as one call, waiting until full, its window closes, or an executor is free."""

    key: str
    cap: int
    until: float
    invs: list[Invocation] = field(default_factory=list)
    samples: int = 0

    @property
    def full(self) -> bool:
        return self.samples >= self.cap


def preload_order(expected: Mapping[str, float], floors: Mapping[str, int], known: Iterable[str]) -> list[str]:
    """Models to preload, first first: those a controller plans warm replicas for (`floors`, most
    replicas first), then the others by the demand `expected`, most first (ties in the order learned);
    with neither, the `known` models in their order."""
    planned = sorted((k for k, n in floors.items() if n > 0), key=lambda k: -floors[k])
    order = planned + sorted((k for k in expected if k not in floors), key=lambda k: -expected[k])
    return order or list(dict.fromkeys(known))


class Dispatcher(DispatchPolicy):
    def __init__(
        self,
        scheduler: Scheduler,
        loads: LoadCosts,
        *,
        slots: int = 1,
        max_batch: int = 1,
        batch_window_s: float = 0.0,
        warm_wait: WarmWaitPolicy | None = None,
        scaling: ScalingController | None = None,
        shed_run_s: Callable[[str, int], float] | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.scheduler = scheduler
        self.loads = loads
        self.slots = slots
        self.max_batch = max_batch
        self.batch_window_s = batch_window_s
        self.warm_wait = warm_wait or WarmWaitPolicy()
        self.scaling = scaling
        self.shed_run_s = shed_run_s  # (model key, samples) -> run seconds
        self._shed: list[Invocation] = []
        self.batch_caps: dict[str, int] = {}  # model key -> samples per batch
        self._ready_by_key: dict[str, dict[int, Invocation]] = {}  # batch key -> ready ones, arrival order
        self._forming: list[Batch] = []  # taken, waiting to be dispatched
        self._open: dict[str, Batch] = {}  # batch key -> the forming batch still filling
        # model key -> parked invocations in parking order (pick_parked compares the oldest of each)
        self._parked: dict[str, list[tuple[Parked, Invocation]]] = {}
        self.waits_started = 0  # batches opened or invocations parked: a shell's sleep may end sooner
        self.counters: collections.Counter[str] = collections.Counter()
        self.expected: dict[str, float] = {}  # model key -> demand learned of so far

    # preloading ---------------------------------------------------------------------------------------
    def expect(self, model_key: str, n: float = 1.0) -> None:
        """Demand for `model_key` learned of before it is dispatched (a request's models, an invocation
        queued, a controller's plan): what `preload_order` ranks by."""
        if model_key:
            self.expected[model_key] = self.expected.get(model_key, 0.0) + n

    def preload_order(self, known: Iterable[str] = ()) -> list[str]:
        """The models an idle executor preloads the first L_e layers of, in order (see `preload_order`)."""
        floors = self.scaling.floors if self.scaling is not None else {}
        return preload_order(self.expected, floors, known)

    # the shell's events ---------------------------------------------------------------------------
    def add(self, inv: Invocation) -> None:
        self.scheduler.push(inv)
        self._index(inv)

    def requeue(self, inv: Invocation) -> None:
        self.scheduler.requeue(inv)
        self._index(inv)

    def cancel(self, invs: Iterable[Invocation]) -> None:
        invs = list(invs)
        self.scheduler.cancel(invs)
        for inv in invs:
            self._unindex(inv)

    def set_batch_size(self, model_key: str, n: int) -> None:
        """Samples one executor may run at once for this model (1: no batching); overrides `max_batch`."""
        if n < 1:
            raise ValueError("batch size must be at least 1")
        self.batch_caps[model_key] = int(n)  # one dict store: atomic, so the head may call it from any thread

    def batch_size(self, model_key: str) -> int:
        return self.batch_caps.get(model_key, self.max_batch)

    def take_shed(self) -> list[Invocation]:
        shed, self._shed = self._shed, []
        return shed

    # what the shell reads ---------------------------------------------------------------------------
    def pending(self) -> bool:
        return bool(self._parked or self._forming or len(self.scheduler))

    @property
    def forming(self) -> int:
        return len(self._forming)

    @property
    def parked(self) -> int:
        return sum(len(q) for q in self._parked.values())

    def wake_at(self, now: float) -> float | None:
        ends = [b.until for b in self._forming]
        ends += [p.since + p.load_s for q in self._parked.values() for p, _ in q]
        # one already due waits for an executor, whose news wakes the shell anyway
        return min((t for t in ends if t > now), default=None)

    def batch_due_at(self) -> float | None:
        """When the earliest forming batch's window closes (the simulator wakes up for it)."""
        return min((b.until for b in self._forming), default=None)

    # deciding -----------------------------------------------------------------------------------------
    def schedule(self, now: float, executors: Collection[ExecutorView]) -> Iterator[Assignment]:
        if self._parked:
            yield from self._run_parked(now, executors)
        if not len(self.scheduler) and not self._forming:
            return
        free = self._free(executors)
        if not free:
            return
        targets = replicas = None
        if self.scaling is not None:
            targets = self.scaling.targets(len(executors))
            replicas = replica_counts(executors)
        while free:
            batch = self._due_batch(now)
            if batch is not None:
                self._forming.remove(batch)
                if self._open.get(batch.key) is batch:
                    del self._open[batch.key]
                yield from self._assign(batch.invs, free, executors, targets, replicas, now)
                continue
            # a forming batch holds one free executor for itself until its window closes
            if len(free) <= len(self._forming) or not len(self.scheduler):
                return
            inv = self.scheduler.pop()
            if inv is None:
                return
            if self._hopeless(inv, now):
                self._unindex(inv)
                self._drop(inv)
                continue
            batch = self._start_batch(inv, now)
            if batch is None:
                yield from self._assign([inv], free, executors, targets, replicas, now)
            elif batch.full or self._open.get(batch.key) is not batch:
                yield from self._assign(batch.invs, free, executors, targets, replicas, now)
            else:
                self._forming.append(batch)

    def _free(self, executors: Collection[ExecutorView]) -> list[ExecutorView]:
        return [e for e in executors if not e.draining and e.load < self.slots]

    def _assign(
        self,
        invs: list[Invocation],
        free: list[ExecutorView],
        executors: Collection[ExecutorView],
        targets: dict[str, int] | None,
        replicas: dict[str, int] | None,
        now: float,
    ) -> Iterator[Assignment]:
        """Place one invocation, or a batch as one call, on the best free executor (a single one may be
        parked instead); `free` loses the executor once the applied assignment fills it."""
        live = []
        for inv in invs:
            if inv.cancelled:  # its request failed while the batch was forming
                self.scheduler.complete(inv, None)
            elif self._hopeless(inv, now):  # it joined a forming batch on `add`, unchecked
                self._drop(inv)
            else:
                live.append(inv)
        if not live:
            return
        self.loads.prepare(live[0], free)
        ex = place(live[0], free, targets, replicas)
        if len(live) == 1 and self._park(live[0], ex, executors, now):
            return
        yield self._charge(ex, live)
        if ex.draining or ex.load >= self.slots:  # the shell applied it (or lost the executor)
            free.remove(ex)

    def _charge(self, ex: ExecutorView, live: list[Invocation]) -> Assignment:
        """The assignment of `live` to `ex`, a cold start charged the load its run will include."""
        load_s = self.loads.exposed_load_s(ex, live[0])
        samples = sum(inv.batch_size for inv in live)
        for inv in live:
            # a cold start's load, shared by the batch's samples, and the inputs' way across hosts
            extra = load_s * inv.batch_size / samples + inv.transfer_s.get(ex.id, 0.0)
            if extra > 0:
                self.scheduler.revise_charge(inv, inv.estimate + extra)
        if len(live) > 1:
            self.counters["batches_dispatched"] += 1
            self.counters["parts_batched"] += len(live)
        return Assignment(ex, tuple(live), load_s)

    # warm wait (cluster.scheduling.warm_wait) --------------------------------------------------------------------
    def _park(self, inv: Invocation, ex: ExecutorView, executors: Collection[ExecutorView], now: float) -> bool:
        """Park `inv` instead of loading its weights on the cold `ex` when a busy holder is expected
        to be free sooner than the load would take; True when parked."""
        key = inv.model_key
        if inv.spread or not self.warm_wait.enabled or not key or key in ex.cached_models:
            return False
        load_s = self.loads.load_s(ex, inv)
        if load_s is None:
            return False
        free_in = [
            e.free_in(now) for e in executors if key in e.cached_models and not e.draining and e.load >= self.slots
        ]
        queue = self._parked.get(key)
        if not should_park(load_s, free_in, len(queue) if queue else 0, self.warm_wait):
            return False
        self._parked.setdefault(key, []).append((Parked(key, now, load_s), inv))
        self.counters["warm_waits"] += 1
        self.waits_started += 1
        return True

    def _run_parked(self, now: float, executors: Collection[ExecutorView]) -> Iterator[Assignment]:
        for key, queue in list(self._parked.items()):
            live = []
            for p, inv in queue:
                if inv.cancelled:  # its request failed while it was parked
                    self.scheduler.complete(inv, None)
                else:
                    live.append((p, inv))
            if live:
                self._parked[key] = live
            else:
                del self._parked[key]
        # executors holding a parked model choose first: one that waited its load time would
        # otherwise take a cold executor while a warm one is free too
        free = sorted(self._free(executors), key=lambda e: not any(k in e.cached_models for k in self._parked))
        for ex in free:
            if not self._parked:
                return
            keys = list(self._parked)
            heads = []
            for k in keys:
                p, inv = self._parked[k][0]
                load_s = self.loads.load_s(ex, inv)  # on this executor, now (its cache may hold part)
                heads.append(Parked(k, p.since, p.load_s if load_s is None else load_s))
            i = pick_parked(heads, ex.cached_models, now)
            if i is None:
                continue
            queue = self._parked[keys[i]]
            _, inv = queue.pop(0)
            if not queue:
                del self._parked[keys[i]]
            if inv.model_key in ex.cached_models:
                self.counters["warm_wait_hits"] += 1
            yield self._charge(ex, [inv])

    # batching (cluster.scheduling.batching) ------------------------------------------------------------------------
    def _index(self, inv: Invocation) -> None:
        if inv.batch_key is not None:
            self._ready_by_key.setdefault(inv.batch_key, {})[inv.id] = inv
            batch = self._open.get(inv.batch_key)
            if batch is not None:  # a batch of this key is waiting: join it now
                self._fill(batch, None)

    def _unindex(self, inv: Invocation) -> None:
        key = inv.batch_key
        ready = self._ready_by_key.get(key) if key is not None else None
        if ready is not None:
            ready.pop(inv.id, None)
            if not ready:
                del self._ready_by_key[key]

    def _fill(self, batch: Batch, now: float | None) -> None:
        """Take ready invocations with the batch's key, in arrival order, while they fit under its cap, of
        the tenants the scheduler's fairness layer admits (`Scheduler.admits`, checked as each one's charge
        lands); with shedding, hopeless ones are dropped rather than take a place (checked at `now`, and at
        assignment for those that join on `add`, where no clock is passed)."""
        ready = self._ready_by_key.get(batch.key, {})
        for inv_id in list(ready):
            inv = ready[inv_id]
            if inv.cancelled:
                del ready[inv_id]  # its request failed; the scheduler skips it when reached
                continue
            if batch.samples + inv.batch_size > batch.cap:
                break
            if not self.scheduler.admits(inv.tenant):
                continue  # layer 1: a tenant past its share waits for its turn, in a batch or not
            del ready[inv_id]
            self.scheduler.take(inv)
            if now is not None and self._hopeless(inv, now):
                self._drop(inv)
                continue
            batch.invs.append(inv)
            batch.samples += inv.batch_size
        if not ready:
            self._ready_by_key.pop(batch.key, None)
        if batch.full:
            self._open.pop(batch.key, None)

    def _start_batch(self, inv: Invocation, now: float) -> Batch | None:
        """A batch led by the invocation just popped, or None when it runs alone."""
        if inv.batch_key is None:
            return None
        self._unindex(inv)
        cap = self.batch_size(inv.model_key)
        if cap <= inv.batch_size:
            return None
        batch = Batch(inv.batch_key, cap, now + self.batch_window_s, [inv], inv.batch_size)
        self._fill(batch, now)
        if not batch.full and self.batch_window_s > 0 and batch.key not in self._open:
            self._open[batch.key] = batch
            self.waits_started += 1
        return batch

    def _due_batch(self, now: float) -> Batch | None:
        for batch in self._forming:
            if batch.full or now >= batch.until:
                return batch
        return None

    # load shedding ----------------------------------------------------------------------------------------
    def _hopeless(self, inv: Invocation, now: float) -> bool:
        """Whether `inv` would miss its deadline even in a run started now at its model's full batch."""
        if self.shed_run_s is None or inv.deadline is None:
            return False
        samples = self.batch_size(inv.model_key) if inv.batch_key is not None else inv.batch_size
        return now + self.shed_run_s(inv.model_key, max(samples, inv.batch_size)) > inv.deadline

    def _drop(self, inv: Invocation) -> None:
        """Settle a dispatched (popped or taken) invocation that will not run: shed work is no service."""
        inv.cancelled = True
        self.scheduler.revise_charge(inv, 0.0)
        self.scheduler.complete(inv, None)
        self._shed.append(inv)
        self.counters["shed"] += 1
