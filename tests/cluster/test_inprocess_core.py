"""`--executors 0` runs ModelFns through the executor core: the memory budget and the layer cache work
in-process as in an executor, and the results are an executor's, bit for bit."""

from __future__ import annotations

from typing import Any

import torch

from cluster.executor.core import ExecutorCore
from cluster.local import LocalRuntime
from cluster.modelfn import MODEL_FNS, ModelFn, register
from cluster.refs import ModelRef
from cluster.runtime import runtime
from tests.cluster.cluster_fns import Stack as LayerStack

LAYERS, WIDTH = 4, 64
LAYER_BYTES = (WIDTH * WIDTH + WIDTH) * 4  # one Linear block, float32
MODEL_BYTES = LAYERS * LAYER_BYTES


class Stack(ModelFn):
    """A model of LAYERS blocks (the layer cache's unit), weights drawn from the ref's seed."""

    name = "cc_test_stack"

    def setup_io(self) -> None:
        self.add_input("x")
        self.add_output("y")

    def load_model(self, ref: ModelRef) -> LayerStack:
        torch.manual_seed(ref.option("seed"))
        return LayerStack(LAYERS, WIDTH)

    def execute(self, model: Any, inputs: dict[str, Any], params: dict[str, Any]) -> dict:
        return {"y": model(self.resolve(inputs, "x"))}


if Stack.name not in MODEL_FNS:
    register(Stack)


def ref(seed: int) -> ModelRef:
    return ModelRef("test", "stack", (), (f"seed{seed}",), options=(("seed", seed),))


def test_the_default_runtime_is_the_executor_core():
    rt = runtime()  # what a prompt gets with --executors 0 (no runtime installed)
    assert isinstance(rt, LocalRuntime) and isinstance(rt.core, ExecutorCore)


def key(seed: int) -> str:
    return ref(seed).key


def test_budget_evicts_layers_of_the_first_model_and_a_second_load_is_a_hit(tmp_path):
    # room for one model and a half: the second model's layers push the first's last layers out
    core = ExecutorCore.in_process(memory_budget=MODEL_BYTES + MODEL_BYTES // 2, weights_dir=tmp_path)
    rt = LocalRuntime(core)
    x = torch.randn(2, WIDTH, generator=torch.Generator().manual_seed(0))

    first = rt.run(Stack.name, ref(1), {"x": x})["y"]
    s = core.stats()
    assert (s.loads, s.hits, s.evictions) == (1, 0, 0)
    assert s.budget.weights == MODEL_BYTES and s.resident == [key(1)]

    rt.run(Stack.name, ref(2), {"x": x})
    s = core.stats()
    assert (s.loads, s.hits) == (2, 0)
    evicted = core.models.cache.evictions
    # least recently used model first, from its last layer back (its first layers stay, to start at once)
    assert evicted and all(k.endswith(key(1)) for k, _ in evicted)
    assert [i for _, i in evicted] == list(range(LAYERS - 1, LAYERS - 1 - len(evicted), -1))
    assert s.budget.weights <= s.budget.total and s.budget.overcommitted == 0
    assert sorted(s.resident) == sorted([key(1), key(2)])  # stack-1 keeps its first layer

    again = rt.run(Stack.name, ref(1), {"x": x})["y"]  # loaded before: a hit, the missing layers stream back
    s = core.stats()
    assert (s.loads, s.hits) == (2, 1)
    assert any(k.endswith(key(2)) for k, _ in core.models.cache.evictions)
    assert torch.equal(first, again)


def test_results_equal_a_plain_forward_pass_bit_for_bit(tmp_path):
    rt = LocalRuntime(ExecutorCore.in_process(memory_budget=MODEL_BYTES, weights_dir=tmp_path))
    x = torch.randn(3, WIDTH, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        expected = Stack().load_model(ref(5))(x)
    for _ in range(2):  # cold (layers stream in behind the forward pass), then warm
        assert torch.equal(rt.run(Stack.name, ref(5), {"x": x})["y"], expected)


def test_free_unloads_every_tier(tmp_path):
    core = ExecutorCore.in_process(memory_budget=4 * MODEL_BYTES, weights_dir=tmp_path)
    rt = LocalRuntime(core)
    rt.run(Stack.name, ref(1), {"x": torch.ones(1, WIDTH)})
    rt.free()
    s = core.stats()
    assert s.budget.weights == 0 and s.resident == []
    rt.run(Stack.name, ref(1), {"x": torch.ones(1, WIDTH)})
    assert core.stats().loads == 2  # built from its files again


def test_a_modelfn_error_is_raised_as_itself(tmp_path):
    rt = LocalRuntime(ExecutorCore.in_process(weights_dir=tmp_path))
    try:
        rt.run(Stack.name, ref(1), {"x": torch.ones(1, WIDTH + 1)})  # wrong width
    except RuntimeError as e:
        assert "shape" in str(e) or "size" in str(e)
    else:
        raise AssertionError("expected the ModelFn's RuntimeError")


class BatchableStack(Stack):
    """Stack whose calls on the same weights may share one forward pass (the denoise step's rule)."""

    name = "cc_test_batchable_stack"

    @classmethod
    def batch_key(cls, call):
        from cluster.scheduling.batching import layout_key

        return layout_key(cls, call)


if BatchableStack.name not in MODEL_FNS:
    register(BatchableStack)


def test_concurrent_calls_batch_in_process():
    """`--executors 0 --max-batch N`: calls that queue while the compute thread is busy run as one
    merged core run, and each caller gets its own sample's result. (Bit-identity with an unbatched run is
    the model's property: the diffusion models are made batch-invariant, this toy Linear stack is not.)"""
    import asyncio
    import threading

    from cluster.local import COMPUTE

    ref = ModelRef("stack", "test", ("/nonexistent/batch",), ("b" * 64,), options=(("seed", 3),))
    xs = [torch.randn(1, WIDTH, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    alone = LocalRuntime(ExecutorCore.in_process(memory_budget=4 * MODEL_BYTES))
    expected = [alone.run(BatchableStack.name, ref, {"x": x})["y"] for x in xs]

    rt = LocalRuntime(ExecutorCore.in_process(memory_budget=4 * MODEL_BYTES), max_batch=4, batch_window_s=0)
    runs: list[int] = []
    core_run = rt.core.run
    rt.core.run = lambda fn, parts, io: (runs.append(len(parts)), core_run(fn, parts, io))[1]
    gate = threading.Event()
    COMPUTE.submit(gate.wait)  # the compute thread is busy: the three calls queue behind it

    async def three() -> list[dict]:
        calls = [asyncio.create_task(rt.call(BatchableStack.name, ref, {"x": x})) for x in xs]
        await asyncio.sleep(0.1)
        gate.set()
        return await asyncio.gather(*calls)

    got = asyncio.run(three())
    assert runs == [3]
    for out, want in zip(got, expected):
        assert torch.allclose(out["y"], want, atol=1e-6)
