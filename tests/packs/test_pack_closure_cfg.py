"""A pack's closure set as the model's CFG function (sd-dynamic-thresholding) is honoured by KSampler in the
server's process and on an executor, where it travels by value with what it closes over (the MODEL, an object
of the pack's class, a float): the patched cfg-8 run equals the plain cfg-4 run, as ComfyUI's formula says."""

from __future__ import annotations

import pytest
import torch

from cluster.executor.local_cluster import start_local_cluster

from .conftest import output, run_prompt
from .test_pack_runs import _sampling_prompt

MODES = ["in_process", "executor"]


@pytest.fixture(scope="module")
def cluster():
    head, rt = start_local_cluster(1, threads_per_executor=1)
    yield head, rt
    head.stop()


@pytest.mark.parametrize("mode", MODES)
async def test_a_closure_cfg_function_is_honoured(packs_registry, cluster, fixed_threads, mode):
    rt = cluster[1] if mode == "executor" else None
    patched = {
        **_sampling_prompt(["patch", 0], cfg=8.0),
        "patch": {"class_type": "ClosureCFG", "inputs": {"model": ["ckpt", 0], "factor": 0.5}},
    }
    executor, _ = await run_prompt(packs_registry, patched, runtime=rt, prompt_id=f"closure-{mode}")
    assert executor.success, executor.status_messages
    half, _ = await run_prompt(
        packs_registry, _sampling_prompt(["ckpt", 0], cfg=4.0), runtime=rt, prompt_id=f"half-{mode}"
    )
    full, _ = await run_prompt(
        packs_registry, _sampling_prompt(["ckpt", 0], cfg=8.0), runtime=rt, prompt_id=f"full-{mode}"
    )
    patched_out, half_out = output(executor, "ks")["samples"], output(half, "ks")["samples"]
    full_out = output(full, "ks")["samples"]
    assert torch.allclose(patched_out, half_out, rtol=1e-4, atol=1e-3)
    assert (patched_out - full_out).abs().max() > 100 * (patched_out - half_out).abs().max()
