"""Device memory on a big GPU, on the CPU: the reserve grows with the device, and a ModelFn that runs out
of memory gets the idle models' cached weights back and one more try."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from cluster.call import Params
from cluster.executor.core import (
    DirectIO,
    ExecutorCore,
    Fault,
    Part,
    cap_device_memory,
    default_memory_budget,
    gpu_reserve,
)
from cluster.local import LocalRuntime
from cluster.modelfn import MODEL_FNS, ModelFn, register
from cluster.refs import ModelRef

GiB = 1 << 30
WIDTH = 32


@pytest.mark.parametrize(
    "total, reserve",
    [
        (141 * 10**9, 141 * 10**9 // 10),  # an H200: 10 %
        (80 * GiB, 8 * GiB),  # 8 GiB floor
        (24 * GiB, 8 * GiB),
        (12 * GiB, 6 * GiB),  # a small GPU keeps half
    ],
)
def test_the_gpu_reserve_scales_with_the_device(total, reserve):
    assert gpu_reserve(total) == reserve


def test_a_gpu_budget_is_free_memory_less_the_reserve_split_over_its_executors(monkeypatch):
    total, free = 141 * 10**9, 139 * 10**9
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (free, total))
    assert default_memory_budget("cuda:0") == free - total // 10
    assert default_memory_budget("cuda:0", share=2) == (free - total // 10) // 2
    assert default_memory_budget("cpu") == 8 * GiB


class OomParams(Params):
    ooms: int = 0


class OutOfMemoryAtFirst(ModelFn):
    """A linear model that runs out of device memory the first `params.ooms` times it executes."""

    name = "cc_test_oom_at_first"
    Params = OomParams

    def setup_io(self) -> None:
        self.add_input("x")
        self.add_output("y")
        self.calls = 0

    def load_model(self, ref: ModelRef) -> torch.nn.Module:
        torch.manual_seed(ref.option("seed"))
        return torch.nn.Sequential(*(torch.nn.Linear(WIDTH, WIDTH) for _ in range(2)))

    def execute(self, model: Any, inputs: dict[str, Any], params: OomParams) -> dict:
        self.calls += 1
        if self.calls <= params.ooms:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return {"y": model(self.resolve(inputs, "x"))}


if OutOfMemoryAtFirst.name not in MODEL_FNS:
    register(OutOfMemoryAtFirst)


def ref(seed: int) -> ModelRef:
    return ModelRef("test", "oom", (), (f"seed{seed}",), options=(("seed", seed),))


def test_an_out_of_memory_run_evicts_idle_models_and_succeeds_on_its_retry(tmp_path):
    core = ExecutorCore.in_process(memory_budget=1 << 24, weights_dir=tmp_path)
    rt = LocalRuntime(core)
    x = torch.randn(2, WIDTH)
    rt.run(OutOfMemoryAtFirst.name, ref(1), {"x": x})  # an idle model, resident
    assert core.stats().resident == [ref(1).key]
    fn = core.fn(OutOfMemoryAtFirst.name)
    fn.calls = 0
    y = rt.run(OutOfMemoryAtFirst.name, ref(2), {"x": x}, {"ooms": 1})["y"]
    assert fn.calls == 2
    assert core.stats().resident == [ref(2).key]  # the idle one gave its layers back
    with torch.inference_mode():
        assert torch.equal(y, fn.load_model(ref(2))(x))


def test_a_run_that_does_not_fit_after_eviction_fails_with_the_out_of_memory_error(tmp_path):
    core = ExecutorCore.in_process(memory_budget=1 << 24, weights_dir=tmp_path)
    fn = core.fn(OutOfMemoryAtFirst.name)
    (result,) = core.run(
        OutOfMemoryAtFirst.name,
        [Part(ref(3), OomParams(ooms=5), {"x": torch.randn(1, WIDTH)})],
        DirectIO(torch.device("cpu")),
    )
    assert isinstance(result, Fault) and isinstance(result.error, torch.OutOfMemoryError)
    assert fn.calls == 2  # one retry, not a loop


class FixedPeak:
    """A peak probe (a GPU's allocator peak, on the CPU) that measures `peak` bytes for every call."""

    def __init__(self, peak: int) -> None:
        self.peak, self.started = peak, 0

    def start(self) -> None:
        self.started += 1

    def stop(self) -> int:
        return self.peak


def test_activations_are_charged_at_the_peak_measured_for_the_modelfn_and_input_size(tmp_path, monkeypatch):
    core = ExecutorCore.in_process(memory_budget=1 << 26, weights_dir=tmp_path)
    core.peak_probe = FixedPeak(3 << 20)
    reserved = []
    reserve = core.budget.reserve
    monkeypatch.setattr(core.budget, "reserve", lambda n: reserved.append(n) or reserve(n))
    rt = LocalRuntime(core)
    x, wide = torch.randn(2, WIDTH), torch.randn(4, WIDTH)
    for inputs in (x, x, wide):
        rt.run(OutOfMemoryAtFirst.name, ref(4), {"x": inputs})
    # first call: its inputs' bytes, measured; the same size again: the measured peak; a new size: its bytes
    assert reserved == [x.nbytes, 3 << 20, wide.nbytes] and core.peak_probe.started == 3


def test_a_measured_peak_makes_room_by_evicting_cached_weights(tmp_path):
    core = ExecutorCore.in_process(memory_budget=1 << 20, weights_dir=tmp_path)
    layers = 2 * (WIDTH * WIDTH + WIDTH) * 4  # one model's weights
    core.peak_probe = FixedPeak((1 << 20) - layers - 128)  # room for one model's weights beside it, not two
    rt = LocalRuntime(core)
    x = torch.randn(1, WIDTH)
    rt.run(OutOfMemoryAtFirst.name, ref(5), {"x": x})  # measured
    rt.run(OutOfMemoryAtFirst.name, ref(6), {"x": x})  # charged the peak: ref(5)'s idle layers go
    assert core.stats().resident == [ref(6).key] and core.stats().budget.overcommitted == 0


def test_executors_sharing_a_gpu_cap_their_allocator_at_their_share(monkeypatch):
    total = 141 * 10**9
    caps = []
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (total - 10**9, total))
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", lambda f, device: caps.append((f, str(device))))
    budget = default_memory_budget("cuda:0", share=2)
    fraction = cap_device_memory("cuda:0", budget, share=2)
    assert caps == [(fraction, "cuda:0")] and fraction == pytest.approx((budget + total // 10 // 2) / total)
    assert 0.45 < fraction < 0.5
    assert cap_device_memory("cuda:0", budget, share=1) is None and cap_device_memory("cpu", budget, 4) is None
    assert len(caps) == 1
