"""Where ModelFn calls go. Node bodies call `runtime().call(...)`; which runtime answers
(in-process, or the cluster's scheduler and executors) is set per prompt by the engine."""
from __future__ import annotations

import contextvars
from abc import ABC, abstractmethod
from typing import Any

import torch

from cluster.refs import ModelRef


class Runtime(ABC):
    @abstractmethod
    async def call(self, fn: str, model: ModelRef | None, inputs: dict[str, torch.Tensor | None],
                   params: dict[str, Any] | None = None) -> dict[str, torch.Tensor]:
        """Invoke ModelFn `fn` with weights `model`; returns its outputs by name."""

    def free(self, unload_models: bool = True) -> None:
        """Drop cached weights (ComfyUI's /free)."""


_current: contextvars.ContextVar[Runtime | None] = contextvars.ContextVar("comfy_cluster_runtime", default=None)


def runtime() -> Runtime:
    """The runtime of the running prompt; an in-process one when none was set (scripts, tests)."""
    rt = _current.get()
    if rt is None:
        from cluster.local import default_local_runtime
        rt = default_local_runtime()
    return rt


def use_runtime(rt: Runtime) -> contextvars.Token:
    return _current.set(rt)
