"""Liveness: what the head does when executors join, fall silent, fail a send or exit.

A registration is welcomed (a restarted executor's old self is lost first). An executor is lost when
a send to it fails, when it says goodbye, when its supervisor saw its process exit, or when it has been
silent longer than `lost_after_s` (a live process of this host: `hung_after_s`; silence while the head
itself did not run is not counted): its work is re-run or failed (cluster.control.lineage), its host's
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
HUNG_AFTER_S = 30.0  # the least silence after which a live executor process of this host counts as wedged


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
        self.hung_after_s = max(HUNG_AFTER_S, 10 * lost_after_s)  # for live executor processes of this host
        self._last_check = float("inf")  # no check yet: nothing was unwatched
        self._slow: set[str] = set()  # live local executors silent past lost_after_s (logged once each)
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
        self._credit_unwatched(now)
        overdue = self.members.overdue(now, self.lost_after_s)
        self._slow &= {ex.id for ex in overdue}  # heard again: a next silence is logged again
        for ex in overdue:
            cause = self.exit_cause(ex)
            if cause is None and self._only_slow(ex, now):
                continue
            self.lose(ex, cause or f"no heartbeat for {now - ex.last_seen:.1f}s")
        for ex in list(self.members.executors.values()):
            for did, limit in self.lineage.expire(ex, now):
                self.send(ex, m.Abort(did, f"deadline of {limit:g}s exceeded"))

    def _credit_unwatched(self, now: float) -> None:
        """Silence the head did not watch is not counted: when the head itself did not run for longer than
        a heartbeat (an overloaded host), the executors' heartbeats of that time may still be on their way."""
        unwatched = now - self._last_check - self.heartbeat_s
        self._last_check = now
        if unwatched > 0:
            for ex in self.members.executors.values():
                ex.last_seen = min(now, ex.last_seen + unwatched)

    def _only_slow(self, ex: ExecutorState, now: float) -> bool:
        """Whether a silent executor is a live process of this host, silent for less than `hung_after_s`.
        Its exit would be known at once (its supervisor, `alive`); silence from a live one is far more often
        a host too loaded to schedule its watchdog than a wedged process, and its re-run would only add load.
        Executors of other hosts have nothing but their heartbeats to go by."""
        if not self.members.same_host(ex) or not alive(ex.pid) or now - ex.last_seen > self.hung_after_s:
            return False
        if ex.id not in self._slow:
            self._slow.add(ex.id)
            log.warning(
                "executor %s has sent nothing for %.1f s, but its process is alive: an overloaded host? "
                "(lost after %.0f s of silence)",
                ex.id,
                now - ex.last_seen,
                self.hung_after_s,
            )
        return True

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
