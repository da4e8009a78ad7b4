"""Between tenants the worker serves the least-served (by weight) first, so one tenant's long queue
does not make another wait behind all of it; each tenant's weight reaches the cluster scheduler."""

from __future__ import annotations

import tenant_nodes as tn


def _start(entry: dict) -> int:
    return dict(entry["status"]["messages"])["execution_start"]["timestamp"]


async def test_second_tenant_does_not_wait_behind_the_first_ones_queue(hosted):
    hosted.add("alice")
    hosted.add("bob", weight=3.0)
    weights = []

    class Scheduler:
        def set_tenant_weight(self, tenant, weight):
            weights.append((tenant, weight))

    hosted.server.config.scheduler = Scheduler()
    first = [await hosted.post_prompt("alice", tn.prompt(i, slow=0.15)) for i in range(4)]
    late = await hosted.post_prompt("bob", tn.prompt(50, slow=0.05))
    alice = [await hosted.wait_history("alice", p["prompt_id"]) for p in first]
    bob = await hosted.wait_history("bob", late["prompt_id"])
    starts = sorted(_start(e) for e in alice)
    assert _start(bob) < starts[2]  # served right after alice's running prompt, not after all four
    assert ("bob", 3.0) in weights and ("alice", 1.0) in weights
