"""TorchCompileModel end to end on the demo SD1 model at 64 px (inductor on the CPU): the compiled network gives
the eager image within rounding, and an executor, which compiles the network it loads itself, gives the
in-process compiled image. The denoise step compiles once per (network, backend) and reuses it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.e2e.test_edit_family_on_executors import _sd1
from tests.e2e.test_samplers_on_executors import differing_cases, render_in_process, render_on_server


def _compiled(case: str, backend: str) -> dict:
    prompt = _sd1(case)
    prompt["20"] = {"class_type": "TorchCompileModel", "inputs": {"model": ["4", 0], "backend": backend}}
    prompt["3"]["inputs"]["model"] = ["20", 0]
    return prompt


CASES = {"eager": _sd1("tc_eager"), "inductor": _compiled("tc_inductor", "inductor")}


@pytest.fixture(scope="module")
def in_process_images(demo_workspace) -> dict[str, np.ndarray]:
    return render_in_process(demo_workspace, CASES)


def test_compiled_model_gives_the_eager_image_within_rounding(in_process_images):
    diff = np.abs(in_process_images["inductor"].astype(int) - in_process_images["eager"].astype(int))
    assert diff.max() <= 2, diff.max()


def test_the_step_compiles_once_per_network_and_backend(monkeypatch):
    from nodes.modelfns.denoise import DenoiseStep
    from nodes.models.components import SD1_LATENT, DiffusionModel

    calls = []
    monkeypatch.setattr(torch, "compile", lambda module, backend: calls.append((module, backend)) or object())
    step = DenoiseStep()
    net, other = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    model = DiffusionModel.__new__(DiffusionModel)  # no __post_init__: the step only swaps the network
    model.module, model.latent_format = net, SD1_LATENT
    first = step._compile(model, "inductor")
    assert step._compile(model, "inductor").module is first.module and model.module is net
    step._compile(model, "cudagraphs")
    model.module = other
    step._compile(model, "inductor")
    assert calls == [(net, "inductor"), (net, "cudagraphs"), (other, "inductor")]


def test_an_executor_compiles_and_gives_the_in_process_compiled_image(serve, in_process_images):
    base = serve("--executors", "1", "--executor-threads", "1")
    differing = differing_cases(render_on_server(base, CASES), in_process_images)
    assert not differing, f"images differ from the in-process run (values differing per case): {differing}"
