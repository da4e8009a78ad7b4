"""Query-aware cascades (DiffServe): a light model answers first, a discriminator scores the image,
the heavy model re-runs the queries it rejects, and a controller sizes the threshold, batch sizes and
executors from measured demand. `cascade_stats()` is the section GET /cluster/stats includes.

Imports are deferred so that `comfy-cluster` starts without loading the solver."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cluster.cascade.controller import CascadeController
    from cluster.cascade.spec import CascadeSpec


def declare_workspace_cascades(root: Path, controller: CascadeController | None = None) -> dict[str, CascadeSpec]:
    """Declare a workspace's `cascades/*.yaml` to the controller (re-reading them: edits take effect,
    measurements are kept)."""
    from cluster.cascade.controller import default_controller
    from cluster.cascade.spec import load_cascades

    controller = controller or default_controller()
    specs = load_cascades(Path(root))
    for spec in specs.values():
        controller.add(spec)
    return specs


def cascade_stats(root: Path | None = None) -> dict:
    """Every declared cascade with its measurements and current decision (JSON-ready); with `root`,
    that workspace's cascades/*.yaml are declared (re-read) first."""
    from cluster.cascade.controller import default_controller

    if root is not None:
        declare_workspace_cascades(root)
    return default_controller().stats()
