"""Two executors' data planes running a ModelFn with a callback input, as an executor would."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import Future
from typing import Any

import torch
from torch import nn

from cluster.call import NoParams
from cluster.dataplane.plane import ExecutorDataPlane
from cluster.modelfn import ModelFn


class Scaled(ModelFn):
    name = "test_scaled_with_control"

    def setup_io(self) -> None:
        self.add_input("x")
        self.add_input("control", callback=True)
        self.add_output("y")

    def load_model(self, ref):
        return nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8))

    def execute(self, model: Any, inputs, params) -> dict[str, torch.Tensor]:
        h = model[0](inputs["x"])  # first half runs before the control input exists
        self.started_at = time.perf_counter()
        h = h + self.resolve(inputs, "control")
        return {"y": model[1](h)}


@torch.inference_mode()
def test_executor_flow_with_a_late_callback_input(tmp_path):
    a = ExecutorDataPlane(f"ea{uuid.uuid4().hex[:6]}", 1 << 24, 1 << 20, weights_dir=tmp_path)
    b = ExecutorDataPlane(f"eb{uuid.uuid4().hex[:6]}", 1 << 24, 1 << 20, weights_dir=tmp_path)
    try:
        fn = Scaled()
        torch.manual_seed(0)
        model = fn.load_model(None)
        ref_model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8))
        ref_model.load_state_dict(model.state_dict())
        b.cache.register_module("m", model, blocks=lambda m: list(m))
        x = torch.randn(2, 8)
        control = torch.randn(2, 8)
        x_handle = a.publish({"x": x})["x"]
        pending: Future = Future()
        published = []

        def slow_controlnet():
            time.sleep(0.2)
            published.append(time.perf_counter())
            pending.set_result(a.publish({"c": control})["c"])

        threading.Thread(target=slow_controlnet).start()
        with b.invocation() as inv:
            inputs = inv.inputs({"x": x_handle}, pending={"control": pending})
            with b.cache.use("m") as m, b.budget.reserve(1024):
                out = fn.execute(m, inputs, NoParams())
            handles = b.publish(out, readers=1)
        assert fn.started_at < published[0]
        expected = ref_model[1](ref_model[0](x) + control)
        with a.invocation() as inv:
            y = inv.inputs({"y": handles["y"]})["y"]
            assert torch.allclose(y, expected)
        assert a.store.collect() == 2 and b.store.collect() == 1
        assert a.arena.used_bytes == 0 and b.arena.used_bytes == 0
    finally:
        a.close()
        b.close()


@torch.inference_mode()
def test_inputs_are_pulled_onto_the_executors_device(tmp_path):
    """A GPU executor over the shared-memory arena computes on its device: eager and callback inputs
    arrive there. The meta device stands in for CUDA here; a CPU executor gets the arena's tensors."""
    a = ExecutorDataPlane(f"ea{uuid.uuid4().hex[:6]}", 1 << 24, 1 << 20, weights_dir=tmp_path)
    on_meta = ExecutorDataPlane(f"eb{uuid.uuid4().hex[:6]}", 1 << 24, 1 << 20, device="meta", weights_dir=tmp_path)
    try:
        x, c = torch.randn(2, 8), torch.randn(3, 4)
        handles = a.publish({"x": x, "c": c}, readers=2)
        with on_meta.invocation() as inv:
            inputs = inv.inputs(handles, callbacks={"c"})
            assert inputs["x"].device.type == "meta" and inputs["x"].shape == x.shape
            assert inputs["c"]().device.type == "meta" and inputs["c"]().dtype == c.dtype
        with a.invocation() as inv:
            inputs = inv.inputs(handles, callbacks={"c"})
            assert torch.equal(inputs["x"], x) and torch.equal(inputs["c"](), c)
    finally:
        a.close()
        on_meta.close()
