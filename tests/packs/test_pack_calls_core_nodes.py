"""A pack's own node code calls core node functions as in ComfyUI (UltimateSDUpscale, Impact Pack, Inspire):
from a sync node the call returns its tuple, in the server's process and whole on an executor; from an async
node it is awaited; and the result is what the same core nodes give in the graph. Sync code on the event
loop itself gets a clear error instead of a coroutine it cannot unpack."""

from __future__ import annotations

import asyncio

import pytest
import torch

from cluster.executor.local_cluster import start_local_cluster
from nodes.core_calls import both_ways

from .conftest import image, output, run_prompt

CKPT = "sd1-tiny.safetensors"
MODES = ["in_process", "executor"]


@pytest.fixture(scope="module")
def cluster():
    head, rt = start_local_cluster(1, threads_per_executor=1)
    yield head, rt
    head.stop()


def _prompt(node: str) -> dict:
    return {
        "ckpt": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": CKPT}},
        "pos": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["ckpt", 1], "text": "a red bottle"}},
        "neg": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["ckpt", 1], "text": "blurry"}},
        **image(size=64, color=0x336699),
        "pack": {
            "class_type": node,
            "inputs": {
                "model": ["ckpt", 0],
                "vae": ["ckpt", 2],
                "positive": ["pos", 0],
                "negative": ["neg", 0],
                "image": ["img", 0],
            },
        },
        # the same work by the core nodes in the graph
        "enc": {"class_type": "VAEEncode", "inputs": {"pixels": ["img", 0], "vae": ["ckpt", 2]}},
        "ks": {
            "class_type": "KSampler",
            "inputs": {
                "model": ["ckpt", 0],
                "seed": 7,
                "steps": 4,
                "cfg": 7.0,
                "sampler_name": "euler",
                "scheduler": "normal",
                "positive": ["pos", 0],
                "negative": ["neg", 0],
                "latent_image": ["enc", 0],
                "denoise": 0.5,
            },
        },
        "dec": {"class_type": "VAEDecode", "inputs": {"samples": ["ks", 0], "vae": ["ckpt", 2]}},
        "out": {"class_type": "PreviewImage", "inputs": {"images": ["dec", 0]}},
        "keep": {"class_type": "PreviewAny", "inputs": {"source": ["pack", 0]}},
    }


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("node", ["RedrawSync", "RedrawAsync"])
async def test_a_pack_node_calling_core_nodes_gets_their_results(packs_registry, cluster, fixed_threads, mode, node):
    executor, _ = await run_prompt(
        packs_registry,
        _prompt(node),
        runtime=cluster[1] if mode == "executor" else None,
        prompt_id=f"core-{mode}-{node}",
    )
    assert executor.success, executor.status_messages
    assert torch.allclose(output(executor, "pack"), output(executor, "dec"), atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
async def test_samplercustom_from_a_pack_node_matches_ksampler(packs_registry, cluster, fixed_threads, mode):
    executor, _ = await run_prompt(
        packs_registry,
        _prompt("RedrawCustomSync"),
        runtime=cluster[1] if mode == "executor" else None,
        prompt_id=f"custom-{mode}",
    )
    assert executor.success, executor.status_messages
    assert torch.allclose(output(executor, "pack")["samples"], output(executor, "ks")["samples"], atol=1e-4)


@both_ways
async def _latent(width: int) -> tuple[dict]:
    await asyncio.sleep(0)
    return ({"samples": torch.zeros(1, 4, width // 8, width // 8)},)


async def test_sync_code_on_the_event_loop_gets_a_clear_error():
    pending = _latent(64)  # a sync caller running on this loop
    with pytest.raises(RuntimeError, match="synchronous code running on the event loop"):
        (latent,) = pending
    # awaited, it is the function's result as before
    (latent,) = await _latent(64)
    assert latent["samples"].shape == (1, 4, 8, 8)


def test_scripts_still_run_a_core_node_call_with_asyncio_run():
    (latent,) = asyncio.run(_latent(64))
    assert latent["samples"].shape == (1, 4, 8, 8)
    assert _latent(64)[0]["samples"].shape == (1, 4, 8, 8)  # read as the result, it runs
