"""Lineage and re-runs: which invocations each request has in flight, and what becomes of them when
their executor is lost, their deadline passes or their request fails.

ModelFns are deterministic given inputs and params, so an invocation whose executor is lost (no
heartbeat, SIGKILL, disconnect) is refunded and queued again, up to `max_attempts` dispatches; its
inputs are in the caller's segments, which outlive the executor. One that runs past its deadline,
or whose request is cancelled or has another invocation fail, fails with the error that says why."""

from __future__ import annotations

import collections
import concurrent.futures as cf
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cluster import messages as m
from cluster.control.errors import ClusterError, DeadlineExceeded, ExecutorLost, RequestCancelled
from cluster.scheduling.interface import DispatchPolicy
from cluster.scheduling.tenant_scheduler import Invocation, Scheduler

if TYPE_CHECKING:
    from cluster.control.membership import ExecutorState


@dataclass(eq=False)
class Job:
    inv: Invocation[Job]
    dispatch: m.Dispatch  # dispatch_id is rewritten per attempt
    shapes: tuple
    future: cf.Future
    attempts: int = 0
    dispatched_at: float = 0.0
    executor: ExecutorState | None = None
    batched: bool = False  # its last dispatch was a part of a BatchDispatch

    @classmethod
    def of(cls, inv: Invocation[Job], dispatch: m.Dispatch, shapes: tuple, future: cf.Future) -> Job:
        """The job that carries out `inv` (its payload from now on)."""
        job = cls(inv, dispatch, shapes, future)
        inv.payload = job
        return job


class Lineage:
    def __init__(
        self, scheduler: Scheduler, dispatcher: DispatchPolicy, counters: collections.Counter, max_attempts: int
    ) -> None:
        self.scheduler = scheduler
        self.dispatcher = dispatcher
        self.counters = counters
        self.max_attempts = max_attempts
        self._by_request: dict[str, set[Job]] = {}

    def requests(self) -> list[str]:
        return list(self._by_request)

    def track(self, job: Job) -> None:
        self._by_request.setdefault(job.inv.request, set()).add(job)

    def untrack(self, job: Job) -> None:
        jobs = self._by_request.get(job.inv.request)
        if jobs is not None:
            jobs.discard(job)
            if not jobs:
                del self._by_request[job.inv.request]

    @staticmethod
    def dispatched(jobs: list[Job], ex: ExecutorState, ids: Iterator[int], now: float) -> None:
        """The jobs are sent to `ex` now, together (a batch) when several: a new attempt each, under a
        new dispatch id."""
        for job in jobs:
            job.attempts += 1
            job.dispatch.dispatch_id = next(ids)
            job.dispatched_at = now
            job.executor = ex
            job.batched = len(jobs) > 1
            ex.inflight[job.dispatch.dispatch_id] = job

    @staticmethod
    def fail(job: Job, err: Exception) -> None:
        if not job.future.done():
            job.future.set_exception(err)

    def fail_request(self, request: str, err: ClusterError) -> None:
        jobs = self._by_request.pop(request, set())
        queued = [j for j in jobs if j.executor is None]
        self.dispatcher.cancel(j.inv for j in queued)  # parked or forming ones are dropped at the next dispatch
        for j in jobs:
            self.fail(j, err)
        # running ones stay tracked until they finish, so a later cancel still finds them
        running = {j for j in jobs if j.executor is not None}
        if running:
            self._by_request[request] = running

    def fail_all(self, err: ClusterError) -> None:
        for request in self.requests():
            self.fail_request(request, err)

    def rerun(self, jobs: Iterable[Job], executor_id: str, why: str) -> None:
        """The executor `executor_id` was lost while running `jobs`: queue each again, or fail it once it
        has used its `max_attempts`."""
        for job in jobs:
            job.executor = None
            if job.future.done():  # cancelled meanwhile: only settle the accounting
                self.scheduler.complete(job.inv, None)
            elif job.attempts >= self.max_attempts:
                self.scheduler.complete(job.inv, None)
                self.untrack(job)
                self.fail(
                    job,
                    ExecutorLost(
                        f"ModelFn {job.inv.fn!r} lost its executor {job.attempts} times (last: {executor_id}, {why})"
                    ),
                )
            else:
                self.counters["reruns"] += 1
                self.dispatcher.requeue(job.inv)

    def expire(self, ex: ExecutorState, now: float) -> list[tuple[int, float]]:
        """Fail what runs on `ex` past its deadline, with the rest of its request; the executor keeps it
        as a zombie (occupied, taking no new work) until it answers. Returns (dispatch id, deadline)
        of each, for the head to abort."""
        expired = []
        for did, job in list(ex.inflight.items()):
            limit = job.dispatch.deadline_s
            if now - job.dispatched_at > limit:
                del ex.inflight[did]
                ex.zombies.add(did)
                ex.draining = True
                self.counters["deadline_exceeded"] += 1
                self.scheduler.complete(job.inv, now - job.dispatched_at)
                self.untrack(job)
                err = DeadlineExceeded(
                    f"ModelFn {job.inv.fn!r} of request {job.inv.request} ran past its "
                    f"deadline of {limit:g}s on executor {ex.id}"
                )
                self.fail(job, err)
                self.fail_request(job.inv.request, RequestCancelled(f"request {job.inv.request}: {err}"))
                expired.append((did, limit))
        return expired
