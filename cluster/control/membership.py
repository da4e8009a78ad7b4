"""Membership and liveness: who the executors are, how one joins, and when one counts as lost.

With a cluster secret (cluster.secret), only executors that prove they know it join: an executor's
`Hello` carries a nonce, the head's `Challenge` answers with its own and an HMAC proving the head
knows the secret, and the `Register` that follows must carry the HMAC of both nonces; anything else
is `Refused`, with a log line on both sides. A registered executor's heartbeats keep it alive; one
silent for longer than the head's `lost_after_s` is overdue, and the head loses it."""

from __future__ import annotations

import collections
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

from cluster import messages as m
from cluster import secret as cluster_secret

if TYPE_CHECKING:
    from cluster.control.lineage import Job

log = logging.getLogger("cluster.head")


@dataclass(eq=False)
class ExecutorState:
    id: str
    identity: bytes
    host: str
    pid: int
    device: str
    threads: int
    memory_budget: int
    memory_used: int
    cached_models: set[str]
    shm_prefix: str
    last_seen: float
    host_id: str = ""
    ip: str = ""
    data_address: str = ""
    reported_queue: int = 0
    inflight: dict[int, Job] = field(default_factory=dict)
    zombies: set[int] = field(default_factory=set)  # aborted dispatches still occupying it
    draining: bool = False
    completed: int = 0
    warmed: list[str] = field(default_factory=list)  # ModelFns it warmed up before registering
    warm_s: float = 0.0
    pulls: collections.Counter = field(default_factory=collections.Counter)  # its runs' input pulls
    device_peak: int = 0  # its CUDA allocator's peak, as its last Done said
    prefixes: dict[str, list[int]] = field(default_factory=dict)  # preloaded: model -> [resident, L_e, layers]
    preload_sent: list[str] = field(default_factory=list)  # the last preload order sent to it

    @property
    def load(self) -> int:
        return len(self.inflight) + len(self.zombies)

    def free_in(self, now: float) -> float:
        """Seconds until it is expected to start another invocation. It runs its dispatches one after
        another since the oldest was sent, so their estimates add up; the parts of a batch share one
        run, counted as its longest part's estimate (an underestimate for large batches)."""
        alone = batched = 0.0
        started = now
        for job in self.inflight.values():
            if job.batched:
                batched = max(batched, job.inv.estimate)
            else:
                alone += job.inv.estimate
            started = min(started, job.dispatched_at)
        return max(0.0, alone + batched - (now - started))


def alive(pid: int) -> bool:
    """Whether a process of this host is running (a zombie, killed but not yet reaped, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


class Membership:
    """The registered executors, by id and by socket identity, and the challenges of those joining.
    `reply(identity, message)` answers a sender, registered or not."""

    def __init__(
        self,
        secret: bytes | None,
        reply: Callable[[bytes, msgspec.Struct], None],
        counters: collections.Counter,
        host: str,
        host_id: str,
    ) -> None:
        self.secret = secret  # executors must prove they know it (None: any executor may join)
        self.reply = reply
        self.counters = counters
        self.host, self.host_id = host, host_id
        self.executors: dict[str, ExecutorState] = {}
        self._by_identity: dict[bytes, ExecutorState] = {}
        self._challenges: collections.OrderedDict[bytes, tuple[bytes, bytes]] = collections.OrderedDict()

    def find(self, identity: bytes) -> ExecutorState | None:
        return self._by_identity.get(identity)

    def challenge(self, identity: bytes, msg: m.Hello) -> None:
        """Answer a `Hello`: a fresh nonce, and (with a secret) the proof that this head knows it."""
        nonce = os.urandom(16)
        self._challenges[identity] = (msg.nonce[:64], nonce)
        self._challenges.move_to_end(identity)
        while len(self._challenges) > 1000:  # strangers' hellos that never registered
            self._challenges.popitem(last=False)
        theirs = msg.nonce[:64]
        proof = cluster_secret.proof(self.secret, b"head", theirs, nonce) if self.secret is not None else b""
        self.reply(identity, m.Challenge(nonce, proof))

    def refusal(self, identity: bytes, msg: m.Register) -> str | None:
        """Why `msg` may not register (None: it may): with a secret, its proof must answer our challenge."""
        if self.secret is None:
            return None
        nonces = self._challenges.pop(identity, None)
        if not msg.proof or nonces is None:
            return "it presented no cluster secret"
        theirs, ours = nonces
        if not cluster_secret.verify(self.secret, msg.proof, b"executor", ours, theirs, msg.executor_id.encode()):
            return "its cluster secret does not match this head's"
        return None

    def admit(self, identity: bytes, msg: m.Register) -> ExecutorState | None:
        """The state of the executor `msg` registers, not yet a member (`add`); None if it is refused
        (it is told why, and the refusal is logged and counted)."""
        refusal = self.refusal(identity, msg)
        if refusal is not None:
            self.counters["executors_refused"] += 1
            log.warning(
                "refused executor %s (pid %d on %s, %s): %s. Give it the head's secret: "
                "COMFY_CLUSTER_SECRET, or `executor --workspace` with the head's cluster.secret",
                msg.executor_id,
                msg.pid,
                msg.host,
                msg.ip or "address unknown",
                refusal,
            )
            self.reply(identity, m.Refused(refusal))
            return None
        return ExecutorState(
            msg.executor_id,
            identity,
            msg.host,
            msg.pid,
            msg.device,
            msg.threads,
            msg.memory_budget,
            msg.memory_used,
            set(msg.cached_models),
            msg.shm_prefix,
            time.monotonic(),
            msg.host_id,
            msg.ip,
            msg.data_address,
            warmed=list(msg.warmed),
            warm_s=msg.warm_s,
        )

    def add(self, ex: ExecutorState) -> None:
        self.executors[ex.id] = ex
        self._by_identity[ex.identity] = ex
        log.info(
            "executor %s registered (%s, %d threads, pid %d on %s%s%s)",
            ex.id,
            ex.device,
            ex.threads,
            ex.pid,
            ex.host,
            f", {ex.ip}, data {ex.data_address}" if ex.data_address else "",
            f"; {len(ex.warmed)} ModelFns warmed up in {ex.warm_s:.1f} s" if ex.warmed else "",
        )

    @staticmethod
    def heard(ex: ExecutorState, msg: m.Heartbeat) -> None:
        ex.reported_queue, ex.memory_used, ex.cached_models = msg.queue, msg.memory_used, set(msg.cached_models)
        ex.prefixes = msg.prefixes

    def overdue(self, now: float, lost_after_s: float) -> list[ExecutorState]:
        """Executors not heard from for longer than `lost_after_s`."""
        return [ex for ex in self.executors.values() if now - ex.last_seen > lost_after_s]

    def forget(self, ex: ExecutorState) -> bool:
        """Remove `ex`; False when it is no longer the member under its id (lost or replaced already)."""
        if self.executors.get(ex.id) is not ex:
            return False
        del self.executors[ex.id]
        self._by_identity.pop(ex.identity, None)
        return True

    def same_host(self, ex: ExecutorState) -> bool:
        return ex.host == self.host and (not ex.host_id or ex.host_id == self.host_id)
