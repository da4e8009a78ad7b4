"""The ModelFn seam: one model's forward pass, the unit that is scheduled, scaled, cached and billed.

The interface is the ServerlessT2I paper's: a ModelFn declares its tensor inputs and outputs in
`setup_io` (`add_input(name, callback=False)`, `add_output(name)`), builds its weights in
`load_model`, and runs in `execute` on its parameters, a struct of its declared `Params` type
(cluster.call.Params). It is stateless: with the same inputs and params (seeds
included) it gives the same outputs, so any executor may run or re-run it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from cluster import call
from cluster.executor.providers import load_providers
from cluster.refs import ModelRef

if TYPE_CHECKING:
    from cluster.scheduling.batching import Call

TensorSource = torch.Tensor | Callable[[], torch.Tensor]
# How a tensor input lines up with a batch of n samples (cluster.scheduling.batching): ("sample", dtype, shape
# past the batch), ("shared", ...values) for one tensor every request has equal; None when the input cannot
# be batched.
Layout = tuple | None


@dataclass(frozen=True)
class InputSpec:
    name: str
    callback: bool = False  # fetched only when execute() first calls it (a zero-argument callable)


class ModelFn(ABC):
    """Subclasses set `name` (the registry key) and `Params` (their parameters' struct; none by default) and
    implement setup_io, load_model and execute."""

    name: ClassVar[str]
    Params: ClassVar[type[call.Params]] = call.NoParams

    def __init__(self) -> None:
        self.inputs: dict[str, InputSpec] = {}
        self.outputs: list[str] = []
        self.setup_io()

    def add_input(self, name: str, callback: bool = False) -> None:
        self.inputs[name] = InputSpec(name, callback)

    def add_output(self, name: str) -> None:
        self.outputs.append(name)

    @abstractmethod
    def setup_io(self) -> None:
        """Declare inputs and outputs."""

    @abstractmethod
    def load_model(self, ref: ModelRef) -> Any:
        """Build the model this function runs from `ref` (called on a weight-cache miss)."""

    @abstractmethod
    def execute(self, model: Any, inputs: dict[str, TensorSource], params: Any) -> dict[str, torch.Tensor]:
        """Run once. Tensors in `inputs` (callables for callback inputs); `params` is a `self.Params`."""

    # -- batching (cluster.scheduling.batching): optional, for ModelFns whose calls from different requests may
    # share one forward pass. The back end knows no model: these say which calls are compatible.
    @classmethod
    def batch_key(cls, call: Call) -> Hashable | None:
        """Equal keys: the calls can run as one batch (`cluster.scheduling.batching.layout_key` builds the usual
        key). None, the default: this call runs alone."""
        return None

    def execute_batch(self, model: Any, calls: Sequence[Call]) -> list[dict[str, torch.Tensor]]:
        """Run calls of equal batch keys as one, each with its own inputs and params; one output dict per call,
        in order. ModelFns whose calls differ in more than their samples (a denoising step's sampler, seed and
        schedule) override it and share what they can inside. Not overridden, the back end concatenates the
        calls' inputs along the batch, runs `execute` once and splits the outputs (batching.merge)."""
        raise NotImplementedError

    @classmethod
    def input_layout(cls, name: str, t: torch.Tensor, n: int, ndim: int) -> Layout:
        """How tensor input `name` lines up with a batch of `n` samples whose `x` has rank `ndim`. The
        default: `x`, and any tensor with one entry or one per sample, are per sample."""
        if name == "x" or (t.ndim >= 1 and t.shape[0] in (1, n)):
            return ("sample", str(t.dtype), tuple(t.shape[1:]))
        return None

    @classmethod
    def warm_up(cls) -> None:
        """Pay, once per process and before the first invocation, what a first call would otherwise pay:
        importing the model code, first-call set-up of kernels. `warm_up_all` calls it at an executor's
        start, before it takes work. The default does nothing."""

    def resolve(self, inputs: dict[str, TensorSource], name: str) -> torch.Tensor | None:
        """The tensor of input `name`, fetching it now if it is a callback input."""
        value = inputs.get(name)
        return value() if callable(value) else value


MODEL_FNS: dict[str, type[ModelFn]] = {}


def register(cls: type[ModelFn]) -> type[ModelFn]:
    """Class decorator: make a ModelFn callable by name from any runtime."""
    if cls.name in MODEL_FNS and MODEL_FNS[cls.name] is not cls:
        raise ValueError(f"ModelFn {cls.name!r} registered twice")
    MODEL_FNS[cls.name] = cls
    return cls


def warm_up_all() -> list[str]:
    """Import every provider and warm every registered ModelFn up (`ModelFn.warm_up`); the names warmed.
    An executor does this before it registers, so a fresh cluster's first prompt finds the model code
    imported instead of importing it (seconds) on the critical path."""
    load_providers()
    for _, cls in sorted(MODEL_FNS.items()):
        cls.warm_up()
    return sorted(MODEL_FNS)


def get_model_fn(name: str) -> type[ModelFn]:
    """The ModelFn registered as `name`, importing the providers (cluster.executor.providers) on the first miss."""
    if name not in MODEL_FNS:
        load_providers()
    try:
        return MODEL_FNS[name]
    except KeyError:
        raise KeyError(f"unknown ModelFn {name!r}; known: {sorted(MODEL_FNS)}") from None
