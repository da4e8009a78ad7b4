"""With a cluster runtime, a pack's node runs whole as one `pack_node` invocation on an executor
process: it computes the same results, its progress and websocket events reach the client, a MODEL it
patched is honoured by KSampler's steps on the executors, and a node that hangs fails its prompt at the
deadline while the head keeps serving (its executor is replaced)."""

from __future__ import annotations

import os

import pytest
import torch

from cluster.executor.local_cluster import start_local_cluster
from comfy_bridge.packs import remote

from .conftest import error_of, image, output, run_prompt
from .test_pack_runs import _sampling_prompt


@pytest.fixture(scope="module")
def cluster():
    head, rt = start_local_cluster(1, threads_per_executor=1)
    yield head, rt
    head.stop()


async def test_pack_node_runs_on_an_executor_with_events_replayed(packs_registry, cluster):
    from comfy_bridge.compat.server import PromptServer

    head, rt = cluster
    prompt = {
        **image(color=0xFF0000),
        "inv": {"class_type": "V1Invert", "inputs": {"image": ["img", 0]}},
        "prog": {"class_type": "V1Progress", "inputs": {"image": ["inv", 0], "steps": 2}},
        "show": {"class_type": "V1ShowText", "inputs": {"text": ["prog", 1]}},
    }
    sent = []
    before = PromptServer.instance
    PromptServer.instance = type(
        "S", (), {"send_sync": lambda self, e, d, sid=None: sent.append((e, d)), "client_id": None}
    )()
    try:
        executor, sink = await run_prompt(packs_registry, prompt, runtime=rt, prompt_id="c1")
    finally:
        PromptServer.instance = before
    assert executor.success, executor.status_messages
    pid = output(executor, "prog", 1)
    assert pid != str(os.getpid()) and int(pid) in head.local_cluster.pids()
    expected = torch.zeros(1, 8, 8, 3)
    expected[..., 1:] = 0.5  # (1 - red) * 0.5
    assert torch.equal(output(executor, "prog", 0), expected)
    assert [(d["value"], d["max"]) for d in sink.events("progress") if d["node"] == "prog"] == [(1, 2), (2, 2)]
    assert sent == [("v1_pack.done", {"node": "prog", "steps": 2, "sum": 8 * 8 * 2.0})]
    assert head.stats()["decisions_total"] >= 3  # three pack nodes, three invocations


async def test_patched_model_from_an_executor_is_honoured_by_ksampler(packs_registry, cluster, fixed_threads):
    _, rt = cluster
    patched = {
        **_sampling_prompt(["patch", 0], cfg=8.0),
        "patch": {"class_type": "PatchCFG", "inputs": {"model": ["ckpt", 0]}},
    }
    on_cluster, _ = await run_prompt(packs_registry, patched, runtime=rt, prompt_id="c2")
    assert on_cluster.success, on_cluster.status_messages
    half, _ = await run_prompt(packs_registry, _sampling_prompt(["ckpt", 0], cfg=4.0), prompt_id="c3")
    assert torch.allclose(output(on_cluster, "ks")["samples"], output(half, "ks")["samples"], rtol=1e-4, atol=1e-3)


async def test_a_hanging_node_fails_at_the_deadline_and_the_cluster_serves_on(packs_registry, cluster, monkeypatch):
    head, rt = cluster
    monkeypatch.setattr(remote, "PACK_DEADLINE_S", 3.0)
    prompt = {
        **image(),
        "hang": {"class_type": "HangNode", "inputs": {"image": ["img", 0]}},
        "save": {"class_type": "PreviewImage", "inputs": {"images": ["hang", 0]}},
    }
    executor, _ = await run_prompt(packs_registry, prompt, runtime=rt, prompt_id="c4")
    assert not executor.success
    assert "deadline" in error_of(executor)["exception_message"]
    monkeypatch.setattr(remote, "PACK_DEADLINE_S", 120.0)  # a fresh executor imports torch and the pack first
    head.wait_for_executors(1, timeout=60)  # the aborted executor was replaced
    again = {
        **image(),
        "inv": {"class_type": "V1Invert", "inputs": {"image": ["img", 0]}},
        "save": {"class_type": "PreviewImage", "inputs": {"images": ["inv", 0]}},
    }
    executor, _ = await run_prompt(packs_registry, again, runtime=rt, prompt_id="c5")
    assert executor.success, executor.status_messages
    assert torch.equal(output(executor, "inv"), torch.ones(1, 8, 8, 3))


async def test_real_pack_patterns_run_on_an_executor_as_in_comfyui(packs_registry, cluster):
    """What INPUT_TYPES keeps on the class is there when the node runs in the executor's process, a
    wildcard widget value gets ComfyUI's conversions in turn (INT, FLOAT, STRING, then BOOLEAN: 2 -> True),
    and the pack's import there could hook the (never run) application's startup."""
    head, rt = cluster
    prompt = {
        "n": {"class_type": "V1ListsFromInputTypes", "inputs": {"pick": "second", "anything": 2}},
        "show": {"class_type": "V1ShowText", "inputs": {"text": ["n", 0]}},
    }
    executor, _ = await run_prompt(packs_registry, prompt, runtime=rt, prompt_id="c-patterns")
    assert executor.success, executor.status_messages
    assert output(executor, "n", 0) == "1 True"
