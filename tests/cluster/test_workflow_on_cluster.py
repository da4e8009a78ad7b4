"""The core ModelFns (text_encode, denoise_step, vae_decode) run on executor processes: the
text-to-image workflow gives the same PNG bytes through the cluster as in-process."""

from __future__ import annotations

import json
from pathlib import Path

from cluster.executor.local_cluster import start_local_cluster
from cluster.local import LocalRuntime

REPO = Path(__file__).resolve().parents[2]


async def _run(ws, runtime, extra_data: dict | None = None) -> list[bytes]:
    from comfy_bridge.cli.run import ConsoleSink, load_prompt
    from comfy_bridge.execution import PromptExecutor
    from comfy_bridge.registry import build_registry
    from comfy_bridge.validation import validate_prompt

    registry = build_registry(ws)
    prompt, _ = load_prompt(json.loads((REPO / "workflows_json" / "text_to_image.json").read_text()), registry)
    valid, error, outputs, _ = await validate_prompt(registry, "p", prompt, None)
    assert valid, error
    executor = PromptExecutor(registry, ConsoleSink(False), runtime=runtime)
    await executor.execute_async(prompt, "p", extra_data or {}, outputs)
    assert executor.success
    images = [im for ui in executor.history_result["outputs"].values() for im in ui.get("images", [])]
    return [(ws.output_dir / im.get("subfolder", "") / im["filename"]).read_bytes() for im in images]


async def test_text_to_image_on_two_executors_matches_in_process(demo_workspace, fixed_threads):
    local = await _run(demo_workspace, LocalRuntime())
    head, rt = start_local_cluster(2, threads_per_executor=1)
    try:
        remote = await _run(demo_workspace, rt, {"tenant": "alice"})  # the engine binds per prompt
        stats = head.stats()
    finally:
        head.stop()
    assert local and remote == local
    assert stats["tenants"]["alice"]["vtime"] > 0
    assert stats["decisions_total"] >= 3  # text encodes, the denoising steps, the decode
