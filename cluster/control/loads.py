"""What loading weights and moving inputs cost, as the head measures them (the dispatcher's `LoadCosts`)."""

from __future__ import annotations

from collections.abc import Sequence

from cluster.dataplane import remote
from cluster.scheduling.interface import ExecutorView
from cluster.scheduling.tenant_scheduler import Invocation

DEFAULT_TRANSFER_BPS = 1e9  # bytes/s assumed across hosts until executors have measured a pull


class MeasuredLoads:
    """The head's load costs for the dispatcher: a model's latest measured load time on any executor
    (every executor loads a model from the same files, and the latest measurement reflects the host
    as it is now: page cache, contention); and the time inputs take to cross hosts, from the bandwidth
    of the executors' TCP pulls."""

    def __init__(self) -> None:
        self.measured: dict[str, float] = {}  # model key -> its latest measured load time
        self.transfer_bps = DEFAULT_TRANSFER_BPS

    def observe_transfer(self, nbytes: int, seconds: float) -> None:
        if nbytes >= 1 << 20 and seconds > 0:  # small pulls measure latency, not bandwidth
            self.transfer_bps = 0.7 * self.transfer_bps + 0.3 * nbytes / seconds

    def load_s(self, ex: ExecutorView, inv: Invocation) -> float | None:
        return self.measured.get(inv.model_key) if inv.model_key else None

    def exposed_load_s(self, ex: ExecutorView, inv: Invocation) -> float:
        key = inv.model_key
        return self.measured.get(key, 0.0) if key and key not in ex.cached_models else 0.0

    def prepare(self, inv: Invocation, free: Sequence[ExecutorView]) -> None:
        """Seconds `inv`'s inputs would take to reach each free executor: the bytes not on its host
        (with `--data-plane tcp`, not in its own arena) over the measured bandwidth."""
        total = sum(inv.input_bytes.values())
        if not total:
            return
        tcp = remote.mode() == "tcp"
        inv.transfer_s = {}
        for ex in free:
            near = inv.input_bytes.get(ex.id, 0) if tcp else inv.input_hosts.get(getattr(ex, "host_id", ""), 0)
            if total > near:
                inv.transfer_s[ex.id] = (total - near) / self.transfer_bps
