"""The head's side of the NVSHMEM data plane: one team per host of the GPU executors that can join one.

An NVSHMEM team is fixed when it forms, so a new member (an executor registers) forms a new team: the host's
`TeamPlan` (cluster.dataplane.nvshmem_team) makes a new unique id and renumbers the members, and every member
gets a `Team` message with its ticket. The join is collective: a member cannot serve until every member has
joined, so the head dispatches nothing to a member between the ticket and its `TeamJoined` for that
generation (its arena is being replaced; tensors in the old one are gone, and their consumers' stale pulls
make the callers re-send, as for a lost producer).

A member that is lost (or fails to join) dissolves its team: leaving a team is collective (free, finalize)
and would wait for ever for the member that is gone, so the others get a `Team` of size 0, abandon their
arenas and serve from host shared memory (cluster.dataplane.plane). NVSHMEM ends a process whose init fails,
so an executor lost during its join most likely died of it: after `max_failed_joins` of those on one GPU of a
host, executors there are offered no team (they serve from host memory) instead of dying and being
restarted for ever.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable
from typing import Any

from cluster import messages as m
from cluster.dataplane.nvshmem_team import TeamPlan, new_unique_id

log = logging.getLogger("cluster.head")


class HostTeams:
    def __init__(
        self,
        send: Callable[[Any, m.Team], bool],
        make_uid: Callable[[], bytes] = lambda: new_unique_id(),
        max_failed_joins: int = 2,
    ) -> None:
        self.send = send  # (executor state, message) -> sent
        self.make_uid = make_uid
        self.plans: dict[str, TeamPlan] = {}  # host id -> its team
        self.members: dict[str, Any] = {}  # executor id -> its state
        self.pending: dict[str, int] = {}  # executor id -> the generation it is joining
        self.failed_joins: collections.Counter[tuple[str, str]] = collections.Counter()  # (host id, device)
        self.max_failed_joins = max_failed_joins

    def waiting(self, executor_id: str) -> bool:
        """Whether the executor is between a ticket and its join: not to be dispatched to."""
        return executor_id in self.pending

    def generation(self, host_id: str) -> int:
        plan = self.plans.get(host_id)
        return plan.generation if plan is not None else 0

    def add(self, ex: Any) -> None:
        """A registered executor that can join its host's team: the team forms again with it, unless joins
        keep failing on its GPU."""
        failed = self.failed_joins[(ex.host_id, ex.device)]
        if failed >= self.max_failed_joins:
            log.warning(
                "executor %s is offered no NVSHMEM team: %d joins failed on %s of host %s; it serves "
                "from shared memory",
                ex.id,
                failed,
                ex.device,
                ex.host_id,
            )
            return
        plan = self.plans.setdefault(ex.host_id, TeamPlan(self.make_uid))
        self.members[ex.id] = ex
        self._hand_out(ex.host_id, plan.add(ex.id))

    def lose(self, executor_id: str) -> None:
        """A member is gone (lost, or could not join): its team is dissolved. One lost during its join
        counts as a failed join on its GPU."""
        ex = self.members.pop(executor_id, None)
        joining = self.pending.pop(executor_id, None) is not None
        if ex is None:
            return
        if joining:
            self.failed_joins[(ex.host_id, ex.device)] += 1
        plan = self.plans[ex.host_id]
        others = [member for member in plan.dissolve() if member != executor_id]
        log.warning(
            "NVSHMEM team of host %s dissolved: executor %s is gone; %d member(s) serve from shared memory",
            ex.host_id,
            executor_id,
            len(others),
        )
        for member in others:
            self.pending.pop(member, None)
            self.send(self.members.pop(member), m.Team(b"", 0, 0, plan.generation))

    def joined(self, executor_id: str, msg: m.TeamJoined) -> None:
        if self.pending.get(executor_id) != msg.generation:
            return  # an older generation's answer: a newer ticket is on its way
        if msg.error:
            log.warning(
                "executor %s could not join its host's NVSHMEM team (%s): it serves from shared memory",
                executor_id,
                msg.error,
            )
            self.lose(executor_id)
        else:
            del self.pending[executor_id]

    def _hand_out(self, host_id: str, tickets: dict[str, Any]) -> None:
        generation = next(iter(tickets.values())).generation
        log.info("NVSHMEM team of host %s: generation %d, %d member(s)", host_id, generation, len(tickets))
        for member, t in tickets.items():
            if self.generation(host_id) != generation:
                return  # a send failed, that member was lost, and the team was dissolved
            self.pending[member] = generation
            self.send(self.members[member], m.Team(t.uid, t.rank, t.nranks, generation))
