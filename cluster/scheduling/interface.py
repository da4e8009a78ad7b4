"""The contract between a dispatch policy and the shell that drives it (the head over ZeroMQ, or the
simulator on its event clock), after vLLM's v1/core/sched/interface.py: every method says what it
promises. `cluster.scheduling.dispatcher.Dispatcher` is the one implementation; the shells own the executors,
the transport and the clock, the policy owns what is ready, parked and forming."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from cluster.scheduling.tenant_scheduler import Invocation


class ExecutorView(Protocol):
    """An executor as the policy sees it. The shell owns and updates it: `load` counts what runs or
    is held there, and must include an assignment as soon as the shell has applied it."""

    id: str
    cached_models: set[str]  # models whose weights it holds (placement and warm wait)
    draining: bool  # takes no new work (aborted dispatches, or lost)

    @property
    def load(self) -> int: ...

    def free_in(self, now: float) -> float:
        """Seconds until it is expected to start another invocation (0 when it could now)."""
        ...


class LoadCosts(Protocol):
    """What loading weights costs, as the shell knows it: the head from the load times executors
    report, the simulator from its model of each executor's layer cache."""

    def load_s(self, ex: ExecutorView, inv: Invocation) -> float | None:
        """Seconds loading `inv`'s weights on `ex` would take, compared with waiting for a busy
        holder (warm wait); None when unknown (never measured): then the policy does not wait."""
        ...

    def exposed_load_s(self, ex: ExecutorView, inv: Invocation) -> float:
        """Seconds running `inv` on `ex` will spend loading: charged to its tenant at dispatch."""
        ...

    def prepare(self, inv: Invocation, free: Sequence[ExecutorView]) -> None:
        """Called just before `inv` is placed on one of `free`: a shell may refresh its locality
        (`inv.input_bytes`) from state that changes with every run."""
        ...


@dataclass(frozen=True)
class Assignment:
    """One decision: run `invocations` on `executor`, as one call when there are several (a batch).
    `load_s` is the load time charged for it (0: the executor holds the weights)."""

    executor: ExecutorView
    invocations: tuple[Invocation, ...]
    load_s: float = 0.0

    @property
    def batch(self) -> bool:
        return len(self.invocations) > 1


class DispatchPolicy(ABC):
    """Ready invocations in, assignments out; no I/O, no threads, and the clock is an argument."""

    @abstractmethod
    def add(self, inv: Invocation) -> None:
        """Make a new invocation ready. It may join a batch that is waiting for more at once."""

    @abstractmethod
    def requeue(self, inv: Invocation) -> None:
        """A dispatched invocation was lost with its executor: refund its charge, make it ready again."""

    @abstractmethod
    def cancel(self, invs: Iterable[Invocation]) -> None:
        """Drop invocations that have not started (their request failed). Queued ones are skipped when
        reached; parked or forming ones are dropped, and their charge settled, at the next `schedule`."""

    @abstractmethod
    def schedule(self, now: float, executors: Collection[ExecutorView]) -> Iterator[Assignment]:
        """The decisions possible now, given every registered executor. Lazily: the caller applies
        each assignment (the executor's `load` counts it) before drawing the next, because the next
        placement depends on it. Charges are made as each assignment is drawn: an invocation drawn is
        the caller's to run and to `complete` (or `requeue`) on the scheduler."""

    @abstractmethod
    def wake_at(self, now: float) -> float | None:
        """The earliest time after `now` at which `schedule` may decide something without any other
        event: a batch's window closes, or a parked invocation has waited its load time."""

    @abstractmethod
    def take_shed(self) -> list[Invocation]:
        """The invocations dropped since the last call because they could not finish by their deadline
        (load shedding, off unless the policy was built with it), each settled on the scheduler: the
        shell ends their requests unanswered."""

    @abstractmethod
    def pending(self) -> bool:
        """Whether anything is ready, parked or forming (False: `schedule` yields nothing)."""
