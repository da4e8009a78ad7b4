"""Independent async nodes of one prompt run concurrently, as ComfyUI runs them (its execution suite's
test_parallel_sleep_* and test_multiple_async_parallel_execution time that; API nodes rely on it), with and
without a cluster behind the engine, including async nodes a node expansion adds.

No timing: each async node waits on an event that only the last of the three to arrive sets, so run one
after another the first waits in vain and fails its prompt (after BARRIER_WAIT_S) instead of passing slowly.
"""

from __future__ import annotations

import textwrap

import pytest
import torch

from cluster.executor.local_cluster import start_local_cluster
from nodes import workspace
from nodes.workspace import Workspace, activate

from .conftest import error_of, output, run_prompt

BARRIER_PACK = textwrap.dedent('''
    import asyncio
    from comfy_execution.graph_utils import GraphBuilder

    BARRIER_WAIT_S = 15.0
    _arrived = {}
    _events = {}

    class AsyncBarrier:
        """Returns its image once `parties` nodes of the same group are waiting at once."""
        @classmethod
        def INPUT_TYPES(cls):
            return {"required": {"image": ("IMAGE",), "group": ("STRING", {"default": "g"}),
                                 "parties": ("INT", {"default": 3})}}
        RETURN_TYPES = ("IMAGE",)
        FUNCTION = "wait"
        CATEGORY = "barrier"

        async def wait(self, image, group, parties):
            event = _events.setdefault(group, asyncio.Event())
            _arrived[group] = _arrived.get(group, 0) + 1
            if _arrived[group] >= parties:
                event.set()
            try:
                await asyncio.wait_for(event.wait(), BARRIER_WAIT_S)
            except TimeoutError:
                raise RuntimeError(f"barrier {group}: {_arrived[group]} of {parties} nodes arrived "
                                   "(the async nodes ran one after another)") from None
            return (image,)

    class AverageThree:
        @classmethod
        def INPUT_TYPES(cls):
            return {"required": {"a": ("IMAGE",), "b": ("IMAGE",), "c": ("IMAGE",)}}
        RETURN_TYPES = ("IMAGE",)
        FUNCTION = "run"
        CATEGORY = "barrier"

        def run(self, a, b, c):
            return ((a + b + c) / 3,)

    class ThreeBarriersExpanded:
        """Expands into three AsyncBarrier nodes of one group and their average."""
        @classmethod
        def INPUT_TYPES(cls):
            return {"required": {"image": ("IMAGE",), "group": ("STRING", {"default": "g"})}}
        RETURN_TYPES = ("IMAGE",)
        FUNCTION = "expand"
        CATEGORY = "barrier"

        def expand(self, image, group):
            g = GraphBuilder()
            waits = [g.node("AsyncBarrier", image=image, group=group, parties=3) for _ in range(3)]
            avg = g.node("AverageThree", a=waits[0].out(0), b=waits[1].out(0), c=waits[2].out(0))
            return {"result": (avg.out(0),), "expand": g.finalize()}

    NODE_CLASS_MAPPINGS = {"AsyncBarrier": AsyncBarrier, "AverageThree": AverageThree,
                           "ThreeBarriersExpanded": ThreeBarriersExpanded}
''')


@pytest.fixture(scope="module")
def barrier_registry(tmp_path_factory):
    from comfy_bridge.registry import build_registry

    root = tmp_path_factory.mktemp("barrier_ws")
    ws = Workspace(root).create()
    (ws.root / "custom_nodes" / "barrier_pack.py").write_text(BARRIER_PACK)
    before = workspace._active
    activate(ws)
    yield build_registry(ws)
    workspace._active = before


@pytest.fixture(scope="module")
def cluster():
    head, rt = start_local_cluster(1, threads_per_executor=1)
    yield rt
    head.stop()


@pytest.fixture(params=["in-process", "cluster"])
def runtime(request):
    return request.getfixturevalue("cluster") if request.param == "cluster" else None


def _image(node_id: str, color: int) -> dict:
    return {node_id: {"class_type": "EmptyImage", "inputs": {"width": 4, "height": 4, "batch_size": 1, "color": color}}}


async def test_three_independent_async_nodes_wait_for_each_other(barrier_registry, runtime, request):
    group = f"direct-{request.node.callspec.id}"
    prompt = {**_image("img", 0xFF0000)}
    for i in range(3):
        prompt[f"wait{i}"] = {
            "class_type": "AsyncBarrier",
            "inputs": {"image": ["img", 0], "group": group, "parties": 3},
        }
        prompt[f"show{i}"] = {"class_type": "PreviewImage", "inputs": {"images": [f"wait{i}", 0]}}
    executor, _ = await run_prompt(barrier_registry, prompt, runtime=runtime, prompt_id=group)
    assert executor.success, error_of(executor)["exception_message"]
    for i in range(3):
        assert torch.equal(output(executor, f"wait{i}")[..., 0], torch.ones(1, 4, 4))


async def test_async_nodes_added_by_an_expansion_wait_for_each_other(barrier_registry, runtime, request):
    group = f"expanded-{request.node.callspec.id}"
    prompt = {
        **_image("img", 0x00FF00),
        "three": {"class_type": "ThreeBarriersExpanded", "inputs": {"image": ["img", 0], "group": group}},
        "show": {"class_type": "PreviewImage", "inputs": {"images": ["three", 0]}},
    }
    executor, _ = await run_prompt(barrier_registry, prompt, runtime=runtime, prompt_id=group)
    assert executor.success, error_of(executor)["exception_message"]
    assert torch.equal(output(executor, "three")[..., 1], torch.ones(1, 4, 4))


async def test_an_async_node_on_the_cluster_keeps_the_pack_deadline(barrier_registry, cluster, monkeypatch):
    from comfy_bridge.packs import remote

    monkeypatch.setattr(remote, "PACK_DEADLINE_S", 1.0)
    prompt = {
        **_image("img", 0),
        "wait": {"class_type": "AsyncBarrier", "inputs": {"image": ["img", 0], "group": "alone", "parties": 2}},
        "show": {"class_type": "PreviewImage", "inputs": {"images": ["wait", 0]}},
    }
    executor, _ = await run_prompt(barrier_registry, prompt, runtime=cluster, prompt_id="alone")
    assert not executor.success
    message = error_of(executor)["exception_message"]
    assert "'barrier_pack'" in message and "1 s deadline" in message, message
