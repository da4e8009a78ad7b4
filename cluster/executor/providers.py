"""Where ModelFns come from: the modules that register them (`cluster.modelfn.register`) when imported.

The back end names no provider. The layers above declare theirs, in two ways that add up:
- the entry-point group `comfy_cluster.modelfns` of an installed distribution (pyproject.toml), which a
  bare `python -m cluster.executor` on another machine reads;
- `add_providers(...)`, called by the code that starts a process (the ComfyUI layer on import), which
  `start_local_cluster` hands on to the executors it starts, so a checkout that was not reinstalled
  after a provider was added still runs.
Providers are imported on the first ModelFn name not yet known, not at start-up: they load torch and
model code, which a process that never runs a ModelFn does not need. An executor started to serve
(`--warm-up`) imports them at start instead (`cluster.modelfn.warm_up_all`), before it registers.

No torch here: the ComfyUI layer registers its providers on import, and `comfy-cluster --help` must
stay quick.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

GROUP = "comfy_cluster.modelfns"

_added: list[str] = []
_loaded = False  # every provider imported: a name still unknown is unknown (no rescan of the entry points)


def add_providers(*modules: str) -> None:
    """Declare modules (dotted names) that register ModelFns when imported."""
    global _loaded
    for module in modules:
        if module not in _added:
            _added.append(module)
            _loaded = False


def added_providers() -> list[str]:
    """The modules declared in this process with `add_providers` (to hand on to child processes)."""
    return list(_added)


def providers() -> list[str]:
    """Every provider module: those added in this process, then the entry-point group's."""
    found = list(_added)
    for entry in entry_points(group=GROUP):
        if entry.value not in found:
            found.append(entry.value)
    return found


def load_providers() -> None:
    """Import every provider module (once; a no-op for those already imported)."""
    global _loaded
    if _loaded:
        return
    for module in providers():
        importlib.import_module(module)
    _loaded = True
