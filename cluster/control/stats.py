"""The head's statistics (`Head.stats`, the server's /cluster/stats route): its settings, each executor and
what it runs, each tenant's account, the dispatcher's batching and warm waits, and the counters."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from cluster.dataplane import remote
from cluster.dataplane.caller_store import caller_pulls

if TYPE_CHECKING:
    from cluster.control.head import Head


def head_stats(head: Head) -> dict[str, Any]:
    """A snapshot; the caller holds the head's lock."""
    now = time.monotonic()
    window = 10.0
    recent = sum(1 for t in head.decision_times if t > now - window)
    return {
        "address": head.address,
        "policy": head.policy,
        "delta": head.delta,
        "executors": [
            {
                "id": e.id,
                "host": e.host,
                "ip": e.ip,
                "host_id": e.host_id,
                "data_address": e.data_address,
                "pulls": {"shm": e.pulls["shm"], "tcp": e.pulls["tcp"], "tcp_bytes": e.pulls["tcp_bytes"]},
                "pid": e.pid,
                "device": e.device,
                "threads": e.threads,
                "memory_budget": e.memory_budget,
                "memory_used": e.memory_used,
                "cached_models": sorted(e.cached_models),
                "queue": e.load,
                "reported_queue": e.reported_queue,
                "running": [j.inv.fn for j in e.inflight.values()],
                "completed": e.completed,
                # what it runs, by dispatch: the ModelFn, its model, the request (a served prompt's id), attempt
                "inflight": [
                    {
                        "dispatch_id": did,
                        "fn": j.inv.fn,
                        "model": j.inv.model_key,
                        "request": j.inv.request,
                        "tenant": j.inv.tenant,
                        "attempt": j.attempts,
                        "running_s": round(now - j.dispatched_at, 3),
                    }
                    for did, j in e.inflight.items()
                ],
                "draining": e.draining,
                "last_seen_s": round(now - e.last_seen, 3),
                "nvshmem_team": head.teams.generation(e.host_id) if e.id in head.teams.members else 0,
                "device_peak": e.device_peak,
                "preloaded": dict(e.prefixes),
            }
            for e in head.executors.values()
        ],
        "tenants": {
            t.name: {"vtime": t.vtime, "weight": t.weight, "queued": t.queued, "running": t.running}
            for t in head.scheduler.tenants.values()
        },
        "queued": len(head.scheduler),
        "running": sum(len(e.inflight) for e in head.executors.values()),
        "decisions_total": head.scheduler.decisions,
        "decisions_per_s": recent / window,
        "models": head.scaling.report(list(head.executors.values())),
        "batching": {
            "max_batch": head.max_batch,
            "window_s": head.batch_window_s,
            "batch_sizes": dict(head.dispatcher.batch_caps),
            "forming": head.dispatcher.forming,
        },
        "batches_dispatched": 0,
        "parts_batched": 0,
        "batch_fallbacks": 0,
        "warm_wait": {
            "enabled": head.warm_wait.enabled,
            "max_waiters_per_holder": head.warm_wait.max_waiters_per_holder,
            "load_s": dict(head.loads.measured),
        },
        "parked": head.dispatcher.parked,
        "warm_waits": 0,
        "warm_wait_hits": 0,
        "completed": 0,
        "failed": 0,
        "reruns": 0,
        "executors_lost": 0,
        "bad_messages": 0,
        "deadline_exceeded": 0,
        "lost_inputs": 0,
        "executors_refused": 0,  # 0 until they first move
        "data_plane": {
            "mode": remote.mode(),
            "transfer_GBps": round(head.loads.transfer_bps / 1e9, 3),
            "caller": caller_pulls(),
        },
        **{k: v for k, v in head.counters.items()},
        **{k: v for k, v in head.dispatcher.counters.items()},
    }
