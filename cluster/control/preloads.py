"""Preloading (paper §5.1), the head's side: how to load each model the head has heard of, and which
models each executor is told to fill its free memory with.

The dispatcher keeps the demand the head learned of (each invocation queued, and each model a
controller announces with `expect`) and decides the order (`Dispatcher.preload_order`, the
simulator's decision too); this part sends each executor that list when it changes, as a `Preload`
naming how to load each model (the ModelFn and call of its latest invocation or announcement), and
the executor does the rest (cluster.executor.preloader)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from cluster import messages as m
from cluster.call import ModelFnCall
from cluster.control.membership import ExecutorState
from cluster.scheduling.costs import CostModel


class Preloads:
    def __init__(self, costs: CostModel) -> None:
        self.costs = costs
        self.recipes: dict[str, tuple[str, ModelFnCall]] = {}  # model key -> (ModelFn, a call) that loads it

    def remember(self, model_key: str, fn: str, call: ModelFnCall) -> None:
        self.recipes[model_key] = (fn, call)

    def send(
        self,
        order: Sequence[str],
        executors: Iterable[ExecutorState],
        send: Callable[[ExecutorState, m.Preload], bool],
    ) -> None:
        """Tell each executor the models to preload (of `order`, those it knows how to load) when the
        order has changed for it; one that is draining is told later."""
        order = [k for k in order if k in self.recipes]
        if not order:
            return
        wanted = None
        for ex in list(executors):
            if ex.draining or ex.preload_sent == order:
                continue
            if wanted is None:
                wanted = [
                    m.PreloadModel(fn, key, call, self.costs.measured(fn, key) or 0.0)
                    for key in order
                    for fn, call in [self.recipes[key]]
                ]
            if send(ex, m.Preload(wanted)):
                ex.preload_sent = order
