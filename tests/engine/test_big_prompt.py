"""A 5,000-node chain signs, schedules and runs without recursion and in reasonable time."""

from __future__ import annotations

import time


async def test_five_thousand_node_chain_runs(run, sink):
    n = 5000
    prompt = {"0": {"class_type": "Const", "inputs": {"value": 1.0}}}
    for i in range(1, n):
        prompt[str(i)] = {"class_type": "Add", "inputs": {"a": [str(i - 1), 0], "b": ["0", 0]}}
    prompt["out"] = {"class_type": "Output", "inputs": {"value": [str(n - 1), 0]}}
    start = time.monotonic()
    executor = await run(prompt, client_id=None)
    assert time.monotonic() - start < 30
    assert executor.success
    assert executor.history_result["outputs"]["out"] == {"values": [float(n)]}
    # a cached re-run touches nothing but the output node
    await run(prompt, executor, client_id="c")
    assert sink.executing() == []
