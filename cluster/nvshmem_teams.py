"""The head's side of the NVSHMEM data plane: one team per host of the GPU executors that can join one.

An NVSHMEM team is fixed when it forms, so membership changes (an executor registers, one is lost) form a
new team: the host's `TeamPlan` (cluster.dataplane.nvshmem_team) makes a new unique id and renumbers the
members, and every member gets a `Team` message with its ticket. The join is collective: a member cannot
serve until every member has joined, so the head dispatches nothing to a member between the ticket and
its `TeamJoined` for that generation (its arena is being replaced; tensors in the old one are gone, and
their consumers' stale pulls make the callers re-send, as for a lost producer). A member that fails to join
serves from host shared memory and leaves the team, which forms again without it.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from cluster import messages as m
from cluster.dataplane.nvshmem_team import TeamPlan, new_unique_id

log = logging.getLogger("cluster.head")


class HostTeams:
    def __init__(self, send: Callable[[Any, m.Team], bool],
                 make_uid: Callable[[], bytes] = lambda: new_unique_id()) -> None:
        self.send = send                         # (executor state, message) -> sent
        self.make_uid = make_uid
        self.plans: dict[str, TeamPlan] = {}     # host id -> its team
        self.members: dict[str, Any] = {}        # executor id -> its state
        self.pending: dict[str, int] = {}        # executor id -> the generation it is joining

    def waiting(self, executor_id: str) -> bool:
        """Whether the executor is between a ticket and its join: not to be dispatched to."""
        return executor_id in self.pending

    def generation(self, host_id: str) -> int:
        plan = self.plans.get(host_id)
        return plan.generation if plan is not None else 0

    def add(self, ex: Any) -> None:
        """A registered executor that can join its host's team: the team forms again with it."""
        plan = self.plans.setdefault(ex.host_id, TeamPlan(self.make_uid))
        self.members[ex.id] = ex
        self._hand_out(ex.host_id, plan.add(ex.id))

    def lose(self, executor_id: str) -> None:
        """A member is gone (lost, or could not join): the survivors form a new team."""
        ex = self.members.pop(executor_id, None)
        self.pending.pop(executor_id, None)
        if ex is None:
            return
        plan = self.plans[ex.host_id]
        tickets = plan.lose(executor_id)
        if not tickets:
            del self.plans[ex.host_id]
            return
        self._hand_out(ex.host_id, tickets)

    def joined(self, executor_id: str, msg: m.TeamJoined) -> None:
        if self.pending.get(executor_id) != msg.generation:
            return   # an older generation's answer: a newer ticket is on its way
        del self.pending[executor_id]
        if msg.error:
            log.warning("executor %s could not join its host's NVSHMEM team (%s): it serves from shared memory",
                        executor_id, msg.error)
            self.lose(executor_id)

    def _hand_out(self, host_id: str, tickets: dict[str, Any]) -> None:
        generation = next(iter(tickets.values())).generation
        log.info("NVSHMEM team of host %s: generation %d, %d member(s)", host_id, generation, len(tickets))
        for member, t in tickets.items():
            if self.generation(host_id) != generation:
                return   # a send failed, that member was lost, and a newer team has been handed out
            self.pending[member] = generation
            self.send(self.members[member], m.Team(t.uid, t.rank, t.nranks, generation))
