"""Preloading on real executors (paper §5.1): once the head expects a model, an idle executor holds its
first L_e layers before any invocation of it arrives, and the first invocation loads only the rest; which
models is decided by the dispatcher's `preload_order`, for the head as for the simulator."""

from __future__ import annotations

import time

import torch

import cluster.scheduling.dispatcher
from cluster import messages as m
from cluster.call import ModelFnCall, NoParams, pack
from cluster.executor.local_cluster import start_local_cluster
from cluster.sim.simulator import SimConfig, simulate
from cluster.sim.traces import TraceRequest
from cluster.sim.workflows import catalogue
from tests.cluster.cluster_fns import LAYERS, WIDTH, build_stack, stack_ref

FNS = "tests.cluster.cluster_fns"
FN = "cc_test_layered"
# host -> device copies at 10 MB/s: a 256 KiB layer takes ~26 ms to load, a copy the executor times
SLOW_COPIES = ["--h2d-bandwidth", "1e7"]


def _call(seed: int) -> ModelFnCall:
    return pack(FN, stack_ref(seed), NoParams())


def _preloaded(head, key: str, timeout_s: float = 30.0, settle_s: float = 0.5) -> list[int]:
    """[resident first layers, L_e, layers] the executor reports once its preloading of `key` is done
    (resident as many as L_e, and no change for `settle_s`)."""
    end = time.monotonic() + timeout_s
    last, since = None, time.monotonic()
    while time.monotonic() < end:
        (ex,) = head.stats()["executors"]
        got = ex["preloaded"].get(key)
        if got != last:
            last, since = got, time.monotonic()
        elif got is not None and got[0] >= got[1] and time.monotonic() - since > settle_s:
            return got
        time.sleep(0.05)
    raise AssertionError(f"{key} not preloaded in {timeout_s}s (last report {last})")


async def test_an_expected_model_has_its_first_layers_resident_before_its_first_invocation():
    head, rt = start_local_cluster(1, preload=[FNS], executor_args=SLOW_COPIES)
    dones: list[m.Done] = []
    head.completion_listeners.append(lambda msg: dones.append(msg) if isinstance(msg, m.Done) else None)
    try:
        x = torch.randn(2, WIDTH)
        # a model nobody announced: its first run builds it and loads every layer
        await rt.call(FN, stack_ref(1), {"x": x}, {})
        assert dones[-1].layers_loaded == LAYERS and dones[-1].load_s > 0

        # the deployment's profiling pass (the simulator's too): one run of the expected model computes
        # in half the time its layers take to copy, so Eq. 2 asks for a prefix of about half the layers
        expected = stack_ref(2)
        head.costs.observe(FN, expected.key, (), 0.5 * LAYERS * 263_168 / 1e7)
        head.expect(fn=FN, model_key=expected.key, call=_call(2), n=5)
        resident, le, layers = _preloaded(head, expected.key)
        assert layers == LAYERS and 1 < le < LAYERS
        assert resident == le  # its first L_e layers, not more: the rest stays free
        assert len(dones) == 1  # before any invocation of it arrived

        out = await rt.call(FN, expected, {"x": x}, {})
        assert len(dones) == 2
        assert dones[-1].layers_loaded == LAYERS - le  # the first invocation loads only the remainder
        assert dones[-1].load_s == 0  # and nothing from its files: built ahead
        with torch.inference_mode():
            assert torch.allclose(out["y"], build_stack(2)(x), atol=1e-6)  # the preloaded weights are its own
    finally:
        head.stop()


def test_the_simulator_and_the_head_take_the_preload_decision_from_the_same_function(monkeypatch):
    calls: list[tuple[str, dict[str, float]]] = []
    shell = ["simulator"]

    def only_the_least_expected(expected, floors, known):
        """Preload the least expected model alone: the opposite of the real rule's first choice."""
        calls.append((shell[0], dict(expected)))
        return sorted(expected, key=lambda k: expected[k])[:1]

    monkeypatch.setattr(cluster.scheduling.dispatcher, "preload_order", only_the_least_expected)

    workflows, profiles = catalogue("s1")
    trace = [TraceRequest(float(i), "t", w.name) for i, w in enumerate(workflows)]
    simulate(SimConfig(gpus=2, system="ours", slo_s=1e9, preload=True), trace, workflows, profiles)
    assert calls and calls[-1][1] == {
        m_: float(sum(m_ in w.models for w in workflows)) for m_ in {m_ for w in workflows for m_ in w.models}
    }

    shell[0] = "head"
    head, _ = start_local_cluster(1, preload=[FNS], executor_args=SLOW_COPIES)
    try:
        hot, cold = stack_ref(3), stack_ref(4)
        # the cold one first, so the patched choice is the same after each announcement
        head.expect(fn=FN, model_key=cold.key, call=_call(4), n=1)
        head.expect(fn=FN, model_key=hot.key, call=_call(3), n=5)
        _preloaded(head, cold.key)
        (ex,) = head.stats()["executors"]
        assert hot.key not in ex["preloaded"]  # the real rule would have taken it first
        assert ("head", {hot.key: 5.0, cold.key: 1.0}) in calls
    finally:
        head.stop()
