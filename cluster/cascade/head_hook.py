"""The controller's batch sizes applied to the cluster: each decision sets, on every followed head, the
batch-size cap of the light and the heavy stage's diffusion model (`Head.set_batch_size`).

`follow_head` is called where the server starts its cluster, with how to name a checkpoint's model key
(the node layer knows how checkpoints load; the back end does not); the process's controller listens
from its creation (`controller.default_controller`). This module imports nothing heavy, so following a
head does not load the solver.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from cluster.cascade.allocation import Allocation
    from cluster.cascade.controller import CascadeController
    from cluster.cascade.spec import CascadeSpec

ModelKey = Callable[[str], "str | None"]  # a stage's checkpoint -> the head's model key (None: unknown)


class BatchCaps(Protocol):
    def set_batch_size(self, model_key: str, n: int) -> None: ...


_heads: list[Any] = []
_model_key: ModelKey | None = None


def follow_head(head: Any, model_key: ModelKey) -> None:
    """Apply the controller's batch sizes to `head` (anything with `set_batch_size`) until it stops,
    naming each stage's model with `model_key`."""
    global _model_key
    _model_key = model_key
    if head not in _heads:
        _heads.append(head)
        if hasattr(head, "on_stop"):
            head.on_stop(lambda: _heads.remove(head) if head in _heads else None)


def apply_batch_sizes(target: BatchCaps, spec: CascadeSpec, decision: Allocation, model_key: ModelKey) -> None:
    """Set the batch-size cap of each stage's model on `target` (a head, or the simulator's dispatcher
    in cluster/sim/cascade_scenario.py, so both receive a decision alike)."""
    for stage, size in (("light", decision.light_batch), ("heavy", decision.heavy_batch)):
        if size < 1:  # 0: the heavy stage is not used; its cap stays
            continue
        key = model_key(getattr(spec, stage).checkpoint)
        if key is not None:
            target.set_batch_size(key, size)


def batch_size_listener(controller: CascadeController) -> Callable[[str, Allocation], None]:
    """An `on_decision` listener that sets the stages' batch sizes on the followed heads."""

    def apply(name: str, decision: Allocation) -> None:
        if not _heads or _model_key is None:
            return
        spec = controller.cascades[name].spec
        for head in list(_heads):
            apply_batch_sizes(head, spec, decision, _model_key)

    return apply
