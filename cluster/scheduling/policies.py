"""The tenant scheduling policies by name: the one registry that the head, the simulator, the dispatch
benchmark and the command line (`serve --scheduler`, `simulate --policy`) choose from."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cluster.scheduling.tenant_scheduler import FairScheduler, QueueScheduler, Scheduler

# name -> how to make it; `delta` (the vTime slack) means something to vtime only
_FACTORIES: dict[str, Callable[..., Scheduler]] = {
    "vtime": lambda delta, **kw: FairScheduler(delta, **kw),
    "fifo": lambda delta, **kw: QueueScheduler(**kw),
    "sjf": lambda delta, **kw: QueueScheduler(shortest_first=True, **kw),
    "vtc": lambda delta, **kw: FairScheduler(0.0, charge_count=True, fifo_within=True, **kw),
}
POLICIES = tuple(_FACTORIES)


def make_scheduler(policy: str = "vtime", delta: float = 1.0, **kw: Any) -> Scheduler:
    """A fresh scheduler of the named policy; ValueError naming the choices for an unknown one."""
    factory = _FACTORIES.get(policy)
    if factory is None:
        raise ValueError(f"unknown policy {policy!r}; choose one of {POLICIES}")
    return factory(delta, **kw)
