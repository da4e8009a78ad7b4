"""Where ModelFn calls go. Node bodies call `runtime().call(...)`; which runtime answers
(in-process, or the cluster's scheduler and executors) is set per prompt by the engine."""

from __future__ import annotations

import contextvars
from abc import ABC, abstractmethod
from typing import Any

import torch

from cluster.call import Params
from cluster.refs import ModelRef


class Runtime(ABC):
    """Where a prompt's ModelFn calls run. Two implementations drive the same executor core
    (cluster.executor.core): `cluster.local.LocalRuntime` in this process, `cluster.cluster_runtime.
    ClusterRuntime` through the head on executor processes."""

    @abstractmethod
    async def call(
        self,
        fn: str,
        model: ModelRef | None,
        inputs: dict[str, torch.Tensor | None],
        params: Params | dict[str, Any] | None = None,
        *,
        spread: bool = False,
    ) -> dict[str, torch.Tensor]:
        """Invoke ModelFn `fn` (its registered name) with the weights `model` names (None: a ModelFn
        without weights) on `inputs` (None for an absent optional input) and `params`: a struct of the
        ModelFn's `Params` type, or a mapping of its fields (converted once, here; an unknown or
        mistyped field raises msgspec.ValidationError naming it). A cluster runtime sends the call as one
        `cluster.call.ModelFnCall`.

        Returns every declared output by name, None for one the ModelFn left out. The tensors are the
        caller's: a runtime never changes them after returning, and never changes `inputs`. Results are
        deterministic: the same call gives the same tensors, bit for bit, on any runtime with the same
        torch thread count. Raises the ModelFn's error (in-process its own exception, across processes a
        `cluster.control.head.ModelFnError` with its message and traceback); an `asyncio.CancelledError` leaves
        nothing held for the call. `spread`: the call is meant to run at once beside another one (a CFG split's
        side): a cluster never holds it back for a busy executor that has its weights (warm wait)."""

    def bind(self, tenant: str, prompt_id: str) -> Runtime:
        """The runtime for one prompt: its calls charged to `tenant` and grouped under `prompt_id` (a
        cluster's scheduler shares time between tenants and cancels a prompt's calls together). The
        engine binds once per prompt, then `use_runtime`s the result; the prompt's interrupt flag is
        nodes.progress's. The default: this runtime, which keeps no accounts."""
        return self

    def idle_executors(self) -> int:
        """How many calls submitted now would start at once, each on an executor of its own (a step may then
        split its work: nodes.modelfns.cfg_split). The default: 0, a runtime that runs calls one at a time."""
        return 0

    def free(self, unload_models: bool = True) -> None:
        """ComfyUI's /free: with `unload_models`, forget every loaded model so its memory is given back
        (the next call loads it from its files again). Never fails a call that is running; the default
        does nothing (a runtime whose models live elsewhere)."""


_current: contextvars.ContextVar[Runtime | None] = contextvars.ContextVar("comfy_cluster_runtime", default=None)


def runtime() -> Runtime:
    """The runtime of the running prompt; an in-process one when none was set (scripts, tests)."""
    rt = _current.get()
    if rt is None:
        from cluster.local import default_local_runtime

        rt = default_local_runtime()
    return rt


def use_runtime(rt: Runtime) -> contextvars.Token:
    """Make `rt` the runtime of the current context; give the token to `restore_runtime` when done."""
    return _current.set(rt)


def restore_runtime(token: contextvars.Token) -> None:
    """Undo the `use_runtime` call that returned `token`."""
    _current.reset(token)
