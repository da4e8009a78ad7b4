"""The controller's batch sizes applied to the cluster: each decision sets, on every followed head, the
batch-size cap of the light and the heavy stage's diffusion model (`Head.set_batch_size`).

`follow_head` is called where the server starts its cluster; the process's controller listens from
its creation (`controller.default_controller`). This module imports nothing heavy, so following a
head does not load the solver.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from cluster.cascade.allocation import Allocation
    from cluster.cascade.controller import CascadeController

log = logging.getLogger("cluster.cascade")
_heads: list[Any] = []


def follow_head(head: Any) -> None:
    """Apply the controller's batch sizes to `head` (anything with `set_batch_size`) until it stops."""
    if head not in _heads:
        _heads.append(head)
        if hasattr(head, "on_stop"):
            head.on_stop(lambda: _heads.remove(head) if head in _heads else None)


def checkpoint_model_key(checkpoint: str) -> str | None:
    """The head's model key of a checkpoint's diffusion model (None: not a file of the checkpoints folder)."""
    from nodes.loaders import CheckpointLoaderSimple
    try:
        model = CheckpointLoaderSimple().load_checkpoint(checkpoint)[0]
    except (FileNotFoundError, ValueError, OSError, LookupError) as e:
        log.debug("cascade batch size: %s", e)
        return None
    return None if model is None else model.key


def batch_size_listener(controller: "CascadeController") -> Callable[[str, "Allocation"], None]:
    """An `on_decision` listener that sets the stages' batch sizes on the followed heads."""
    def apply(name: str, decision: "Allocation") -> None:
        if not _heads:
            return
        spec = controller.cascades[name].spec
        for stage, size in (("light", decision.light_batch), ("heavy", decision.heavy_batch)):
            if size < 1:                     # 0: the heavy stage is not used; its cap stays
                continue
            key = checkpoint_model_key(getattr(spec, stage).checkpoint)
            if key is not None:
                for head in list(_heads):
                    head.set_batch_size(key, size)
    return apply
