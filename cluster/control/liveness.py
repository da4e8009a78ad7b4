"""Liveness: what the head does when executors join, fall silent, fail a send or exit.

A registration is welcomed (a restarted executor's old self is lost first). An executor is lost when
a send to it fails, when it says goodbye, when its supervisor saw its process exit, or when it has been
silent longer than `lost_after_s`: its work is re-run or failed (cluster.control.lineage), its host's
NVSHMEM team forms again without it, its arena is unlinked once its process is gone (a live one, only
slow with its heartbeats, may register again and keep it), and the watchers hear of it."""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable

import msgspec
import zmq

from cluster import messages as m
from cluster.control.lineage import Lineage
from cluster.control.membership import ExecutorState, Membership, alive
from cluster.control.transport import Transport
from cluster.dataplane import segments
from cluster.dataplane.host_teams import HostTeams

log = logging.getLogger("cluster.head")


class Liveness:
    """`files_address()`: the model-file socket a Welcome names; `exit_cause(ex)`: how a local executor's
    process ended, when its supervisor knows (None otherwise)."""

    def __init__(
        self,
        members: Membership,
        transport: Transport,
        lineage: Lineage,
        counters: collections.Counter,
        heartbeat_s: float,
        lost_after_s: float,
        files_address: Callable[[], str],
        exit_cause: Callable[[ExecutorState], str | None],
    ) -> None:
        self.members, self.transport, self.lineage, self.counters = members, transport, lineage, counters
        self.heartbeat_s, self.lost_after_s = heartbeat_s, lost_after_s
        self.files_address, self.exit_cause = files_address, exit_cause
        self.teams = HostTeams(self.send_team)  # the NVSHMEM team of each host's GPU executors
        self.lost_watchers: list[Callable[[str], None]] = []

    def send(self, ex: ExecutorState, msg: msgspec.Struct) -> bool:
        """Send `msg` to `ex`; False, and `ex` is lost, when it cannot be."""
        try:
            self.transport.send(ex.identity, msg)
            return True
        except zmq.ZMQError as e:
            self.lose(ex, self.exit_cause(ex) or f"send failed: {e}")
            return False

    def send_team(self, ex: ExecutorState, msg: m.Team) -> bool:
        ex.draining = True  # nothing is dispatched to it until it has joined (cluster.dataplane.host_teams)
        return self.send(ex, msg)

    def register(self, identity: bytes, msg: m.Register) -> None:
        ex = self.members.admit(identity, msg)
        if ex is None:
            return
        old = self.members.executors.get(msg.executor_id)
        if old is not None:
            self.lose(old, "registered again (restarted)")
        self.members.add(ex)
        self.send(ex, m.Welcome(self.heartbeat_s, self.files_address()))
        if msg.nvshmem:
            self.teams.add(ex)

    def check(self, now: float) -> None:
        """Lose the executors silent for too long; abort what runs past its deadline on the others."""
        for ex in self.members.overdue(now, self.lost_after_s):
            self.lose(ex, self.exit_cause(ex) or f"no heartbeat for {now - ex.last_seen:.1f}s")
        for ex in list(self.members.executors.values()):
            for did, limit in self.lineage.expire(ex, now):
                self.send(ex, m.Abort(did, f"deadline of {limit:g}s exceeded"))

    def exited(self, pid: int, cause: str) -> None:
        """The executor process `pid` of this host exited (its supervisor saw it)."""
        for ex in list(self.members.executors.values()):
            if ex.pid == pid and self.members.same_host(ex):
                self.lose(ex, cause)

    def lose(self, ex: ExecutorState, why: str, expected: bool = False) -> None:
        if ex is not self.members.executors.get(ex.id):
            return
        log.log(
            logging.INFO if expected else logging.WARNING,
            "executor %s lost (%s); re-running %d invocation(s)",
            ex.id,
            why,
            len(ex.inflight),
        )
        self.members.forget(ex)
        ex.draining = True  # a dispatch being decided (a send to it just failed) skips it
        self.counters["executors_lost"] += 1
        self.lineage.rerun(ex.inflight.values(), ex.id, why)
        ex.inflight.clear()
        self.teams.lose(ex.id)  # its host's team forms again without it
        if self.members.same_host(ex) and not alive(ex.pid):
            # its arena is gone with it; a live one (slow heartbeats) may register again and keep it
            segments.unlink_prefix(ex.shm_prefix)
        for watch in self.lost_watchers:
            watch(ex.shm_prefix)

    def retire(self, executor_id: str) -> bool:
        """Shut the executor down if it is idle (nothing running or sent to it): True if it was."""
        ex = self.members.executors.get(executor_id)
        if ex is None or ex.inflight or ex.zombies:
            return False
        ex.draining = True
        return self.send(ex, m.Shutdown())

    def shutdown_all(self) -> None:
        for ex in list(self.members.executors.values()):
            self.send(ex, m.Shutdown(head_stopping=True))
