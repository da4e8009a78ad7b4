"""An executor's loaded models, with their weights managed by the data plane's layer cache.

A ModelFn's `load_model` returns whatever object its `execute` wants (a wrapper holding one or more
torch modules, a bare module, or None). The modules inside are adopted by the `LayerCache`: their
weights move to the host tier and are bound back layer by layer within the memory budget, so a
model evicted under pressure is rebuilt from host (or disk) instead of reloaded from its files, and
a partly resident one starts at once while its remaining layers stream in (prefix loading). The
wrapper object keeps pointing at the same module objects, whose parameters the cache rebinds.
Objects without modules (tokenizers only, None) are kept as they are.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from torch import nn

from cluster.modelfn import ModelFn
from cluster.refs import ModelRef, on_this_machine
from cluster.weights.cache import LayerCache


def modules_of(obj: Any) -> dict[str, nn.Module]:
    """The torch modules an object holds: itself, its attributes, or the values of a dict attribute."""
    if isinstance(obj, nn.Module):
        return {"model": obj}
    found: dict[str, nn.Module] = {}
    for name, value in vars(obj).items() if hasattr(obj, "__dict__") else ():
        if isinstance(value, nn.Module):
            found[name] = value
        elif isinstance(value, dict):
            found.update({f"{name}.{k}".replace(".", "_"): v for k, v in value.items() if isinstance(v, nn.Module)})
    return found


def _nbytes(module: nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers()))


def _tied(module: nn.Module) -> bool:
    """Whether a parameter is shared between two places (the layer cache binds each name separately)."""
    return len(list(module.named_parameters(remove_duplicate=False))) != len(list(module.named_parameters()))


class ExecutorModels:
    def __init__(self, cache: LayerCache) -> None:
        self.cache = cache
        self._loaded: dict[str, tuple[Any, bool]] = {}  # cache key -> (object, its weights are managed)
        self._ref_keys: dict[str, str] = {}  # cache key -> ModelRef.key (what the head sees)
        self.loads = 0  # models built from their files (misses)
        self.hits = 0  # uses of a model already built (its layers may still have to stream in)
        self.prebuilt = 0  # models built ahead of their first use (cluster.executor.preloader)
        # one build per key at a time: a run waits for the preloader's build of its model, not a second one
        self._building: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def build(self, fn: ModelFn, ref: ModelRef) -> tuple[str, float]:
        """Build the model from its files unless built: (cache key, seconds it took now, 0 if built
        before; waiting for another thread's build of it counts).
        A managed model's layers are then in the host tier, none resident yet."""
        key = f"{fn.name}-{ref.key}"
        if key in self._loaded:
            return key, 0.0
        t0 = time.perf_counter()
        with self._guard:
            lock = self._building.setdefault(key, threading.Lock())
        with lock:
            if key in self._loaded:  # another thread built it meanwhile: the wait was this caller's load
                return key, time.perf_counter() - t0
            obj = fn.load_model(on_this_machine(ref))  # the head's paths, or this machine's copies
            modules = modules_of(obj)
            holder = nn.ModuleDict(modules)
            managed = bool(modules) and not _tied(holder)
            if managed:
                self.cache.register_module(key, holder)
            else:  # tied weights stay whole, on the executor's device, charged to its budget for good
                holder.to(self.cache.device)
                self.cache.budget.charge_weights(_nbytes(holder), evict=True, force=True)
            self._ref_keys[key] = ref.key
            self._loaded[key] = (obj, managed)
            return key, time.perf_counter() - t0

    def managed(self, key: str) -> bool:
        """Whether `key` is built and its weights are in the layer cache."""
        return key in self._loaded and self._loaded[key][1]

    @contextmanager
    def use(self, fn: ModelFn, ref: ModelRef) -> Iterator[tuple[Any, float]]:
        """(model, seconds spent loading it from its files now); layers stream in while it runs."""
        key, load_s = self.build(fn, ref)
        if load_s > 0:
            self.loads += 1
        else:
            self.hits += 1
        obj, managed = self._loaded[key]
        if not managed:
            yield obj, load_s
            return
        with self.cache.use(key):
            yield obj, load_s

    def unload(self) -> None:
        """Forget every model, weights in all tiers included; the next use loads it from its files again.
        Unmanaged (tied) models give their charge back to the budget."""
        for key, (obj, managed) in list(self._loaded.items()):
            if managed:
                self.cache.forget(key)
            else:
                self.cache.budget.release_weights(_nbytes(nn.ModuleDict(modules_of(obj))))
        self._loaded.clear()
        self._ref_keys.clear()

    def resident(self) -> list[str]:
        """ModelRef keys with at least their first layer resident (they start without waiting)."""
        return sorted(
            {
                ref
                for key, ref in list(self._ref_keys.items())
                if key in self._loaded and (not self._loaded[key][1] or 0 in self.cache.resident(key))
            }
        )
