"""Tiny ModelFns for the cluster tests; executors import this module with --preload."""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path
from typing import Any

import torch

from cluster.call import Params
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef


def tiny_ref(seed: int = 0) -> ModelRef:
    return ModelRef("test", "tiny-linear", (), (f"seed{seed}",), options=(("seed", seed),))


class LinearParams(Params):
    sleep: float = 0.0  # stands in for a long forward pass
    scale: float = 1.0


@register
class TinyLinear(ModelFn):
    """y = tanh(x @ W + b) * scale with W, b drawn from the ref's seed; also returns an absent output."""

    name = "cc_test_linear"
    Params = LinearParams

    def setup_io(self) -> None:
        self.add_input("x")
        self.add_output("y")
        self.add_output("nothing")

    def load_model(self, ref: ModelRef) -> torch.nn.Linear:
        torch.manual_seed(ref.option("seed"))
        return torch.nn.Linear(16, 16)

    def execute(self, model: torch.nn.Linear, inputs: dict[str, Any], params: LinearParams) -> dict:
        time.sleep(params.sleep)
        y = torch.tanh(model(self.resolve(inputs, "x"))) * params.scale
        return {"y": y, "nothing": None}


@register
class Raises(ModelFn):
    name = "cc_test_raise"

    def setup_io(self) -> None:
        self.add_input("x")

    def load_model(self, ref: ModelRef) -> None:
        return None

    def execute(self, model: Any, inputs: dict[str, Any], params: dict[str, Any]) -> dict:
        raise ValueError(f"bad input of shape {tuple(inputs['x'].shape)}")


@register
class Hangs(ModelFn):
    name = "cc_test_hang"

    def setup_io(self) -> None:
        self.add_output("never")

    def load_model(self, ref: ModelRef) -> None:
        return None

    def execute(self, model: Any, inputs: dict[str, Any], params: dict[str, Any]) -> dict:
        time.sleep(3600)
        return {}


def slow_ref(seed: int, load_s: float) -> ModelRef:
    return ModelRef("test", "slow-load", (), (f"seed{seed}",), options=(("seed", seed), ("load_s", load_s)))


@register
class SlowLoad(TinyLinear):
    """TinyLinear whose weights take the ref's `load_s` seconds to load, like a real diffusion model's."""

    name = "cc_test_slow_load"

    def load_model(self, ref: ModelRef) -> torch.nn.Linear:
        time.sleep(float(ref.option("load_s")))
        return super().load_model(ref)


@register
class Crashes(ModelFn):
    """Crashes the executor process in native code, as a torch kernel fault would."""

    name = "cc_test_crash"

    def setup_io(self) -> None:
        self.add_input("x")

    def load_model(self, ref: ModelRef) -> None:
        return None

    def execute(self, model: Any, inputs: dict[str, Any], params: dict[str, Any]) -> dict:
        import faulthandler

        faulthandler._sigsegv()
        return {}


WARMED = False  # set in an executor process by WarmProbe.warm_up (cluster.modelfn.warm_up_all)


@register
class WarmProbe(ModelFn):
    """Answers whether its process warmed it up before this call."""

    name = "cc_test_warm_probe"

    @classmethod
    def warm_up(cls) -> None:
        global WARMED
        WARMED = True

    def setup_io(self) -> None:
        self.add_output("warmed")

    def load_model(self, ref: ModelRef) -> None:
        return None

    def execute(self, model: None, inputs: dict[str, Any], params: dict[str, Any]) -> dict:
        return {"warmed": torch.tensor([float(WARMED)])}


@register
class CollectorProbe(ModelFn):
    """Answers whether its process's cyclic garbage collector is on, and how many objects it froze."""

    name = "cc_test_collector_probe"

    def setup_io(self) -> None:
        self.add_output("state")

    def load_model(self, ref: ModelRef) -> None:
        return None

    def execute(self, model: None, inputs: dict[str, Any], params: dict[str, Any]) -> dict:
        return {"state": torch.tensor([float(gc.isenabled()), float(gc.get_freeze_count())])}


WARM_GATE_ENV = "CC_TEST_WARM_GATE"  # a file's path: warming up waits until it exists


@register
class WarmGate(ModelFn):
    """Holds its executor's warm-up, and so its registration, until the file named by $CC_TEST_WARM_GATE
    exists (no wait where it is unset): a test decides when the executor registers."""

    name = "cc_test_warm_gate"

    @classmethod
    def warm_up(cls) -> None:
        gate = os.environ.get(WARM_GATE_ENV)
        while gate and not Path(gate).exists():
            time.sleep(0.02)

    def setup_io(self) -> None:
        self.add_output("open")

    def load_model(self, ref: ModelRef) -> None:
        return None

    def execute(self, model: None, inputs: dict[str, Any], params: dict[str, Any]) -> dict:
        return {"open": torch.ones(1)}


LAYERS, WIDTH = 8, 256  # cc_test_layered: 8 blocks of 256 KiB


def stack_ref(seed: int) -> ModelRef:
    return ModelRef("test", "stack", (), (f"seed{seed}",), options=(("seed", seed),))


class Stack(torch.nn.Module):
    """`layers` blocks of tanh(Linear(width, width)): a model whose layers the layer cache loads one by one."""

    def __init__(self, layers: int = LAYERS, width: int = WIDTH) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = torch.tanh(block(x))
        return x


def build_stack(seed: int) -> Stack:
    torch.manual_seed(seed)
    return Stack()


@register
class StackFn(ModelFn):
    """A model of LAYERS blocks, one layer each in the layer cache (preloading and prefix loading)."""

    name = "cc_test_layered"

    def setup_io(self) -> None:
        self.add_input("x")
        self.add_output("y")

    def load_model(self, ref: ModelRef) -> Stack:
        return build_stack(ref.option("seed"))

    def execute(self, model: Stack, inputs: dict[str, Any], params: dict[str, Any]) -> dict:
        return {"y": model(self.resolve(inputs, "x"))}
