"""`bench engine`'s engine-alone figure: a run answered from a record of its ModelFn outputs makes the
same calls in the same order and writes the same image."""

from __future__ import annotations

import numpy as np
from PIL import Image

from cluster.local import run_on_compute
from cluster.runtime import use_runtime
from comfy_bridge.bench.engine import _Replay, sd1_prompt


def test_a_replayed_run_makes_every_recorded_call_and_writes_the_same_image(demo_workspace, fixed_threads):
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    registry, prompt, replay = build_registry(demo_workspace), sd1_prompt(32), _Replay()

    async def once():
        use_runtime(replay)
        return await run_prompt(prompt, None, registry, show_progress=False)

    (first,) = run_on_compute(once)
    recorded = len(replay.record)
    replay.start_replay()
    (second,) = run_on_compute(once)
    assert recorded == 2 + 20 + 1  # two text encodes, 20 steps, one decode
    assert next(replay.replay, None) is None  # the replay used the whole record
    assert np.array_equal(np.asarray(Image.open(first)), np.asarray(Image.open(second)))
