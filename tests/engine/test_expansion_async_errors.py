"""Node expansion, async overlap, runtime errors and interrupts."""

from __future__ import annotations

import pytest

from comfy_bridge.execution.graph_utils import GraphBuilder


async def test_expansion_children_have_prefixed_ids_and_parent_display(run, sink):
    g = GraphBuilder(prefix="")
    r = g.node("Repeat", "r", value=g.node("Const", "c", value=1.5).out(0), times=3)
    g.node("Output", "o", value=r.out(0))
    executor = await run(g.finalize())
    assert executor.history_result["outputs"]["o"] == {"values": [12.0]}
    children = [d for e, d in sink.events("executing") if d["node"].startswith("r.")]
    assert [d["node"] for d in children] == ["r.0.0.1", "r.0.0.2", "r.0.0.3"]
    assert {d["display_node"] for d in children} == {"r"}
    states = sink.events("progress_state")[-1][1]["nodes"]
    assert states["r.0.0.2"]["parent_node_id"] == "r" and states["r.0.0.2"]["real_node_id"] == "r"


async def test_expanded_result_is_cached_for_next_prompt(run, sink):
    g = GraphBuilder(prefix="")
    r = g.node("Repeat", "r", value=g.node("Const", "c", value=1.0).out(0), times=2)
    g.node("Output", "o", value=r.out(0))
    executor = await run(g.finalize())
    await run(g.finalize(), executor)
    assert sink.executing() == []


async def test_dynamic_cycle_blames_expanding_node(run, sink):
    g = GraphBuilder(prefix="")
    cyc = g.node("CycleMaker", "m", value=g.node("Const", "c", value=1.0).out(0))
    g.node("Output", "o", value=cyc.out(0))
    await run(g.finalize())
    error = sink.events("execution_error")[0][1]
    assert error["node_id"] == "m" and error["exception_type"] == "graph.DependencyCycleError"
    assert error["exception_message"] == "Dependency cycle detected" and error["traceback"] == []


async def test_async_nodes_overlap(run):
    g = GraphBuilder(prefix="")
    c = g.node("Const", "c", value=1.0)
    from tests.engine.engine_nodes import Rendezvous

    Rendezvous.arrived = 0
    sleeps = [g.node("Rendezvous", f"s{i}", value=c.out(0), parties=4) for i in range(4)]
    total = g.node("Add", "t", a=sleeps[0].out(0), b=sleeps[1].out(0))
    total = g.node("Add", "t2", a=total.out(0), b=g.node("Add", "t3", a=sleeps[2].out(0), b=sleeps[3].out(0)).out(0))
    g.node("Output", "o", value=total.out(0))
    executor = await run(g.finalize())  # each of the four waits until all four are running
    assert executor.history_result["outputs"]["o"] == {"values": [4.0]}


async def test_sync_node_runs_off_the_event_loop(run):
    import asyncio

    g = GraphBuilder(prefix="")
    g.node("Output", "o", value=g.node("SyncSleep", "s", value=1.0, seconds=0.3).out(0))
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    task = asyncio.create_task(ticker())
    await run(g.finalize())
    task.cancel()
    assert ticks >= 5  # the loop kept turning while the sync node slept


# An async failure surfaces on the completion pass, which (as in ComfyUI) has no inputs to report.
@pytest.mark.parametrize(
    "node,etype,message,inputs",
    [
        ("Fail", "RuntimeError", "deliberate failure", {"value": [3.0]}),
        ("AsyncFail", "ValueError", "deliberate async failure", {}),
    ],
)
async def test_error_payload_and_executor_recovers(run, sink, node, etype, message, inputs):
    g = GraphBuilder(prefix="")
    c = g.node("Const", "c", value=3.0)
    g.node("Output", "o", value=g.node(node, "f", value=c.out(0)).out(0))
    executor = await run(g.finalize())
    error = sink.events("execution_error")[0][1]
    assert error["node_id"] == "f" and error["node_type"] == node and error["prompt_id"] == "p1"
    assert error["exception_type"] == etype and error["exception_message"] == f"{message}\n"
    assert error["executed"] == ["c"] and sorted(error["current_outputs"]) == ["c", "f", "o"]
    assert error["current_inputs"] == inputs and error["traceback"]
    assert not executor.success and not sink.events("execution_success")
    ok = GraphBuilder(prefix="")
    ok.node("Output", "o2", value=ok.node("Const", "c", value=3.0).out(0))
    await run(ok.finalize(), executor)
    assert executor.success and sink.events("execution_success")


async def test_interrupt_reports_and_keeps_earlier_results(run, sink):
    g = GraphBuilder(prefix="")
    c = g.node("Const", "c", value=1.0)
    g.node("Output", "o", value=g.node("WaitForInterrupt", "w", value=c.out(0)).out(0))
    executor = await run(g.finalize())
    msg = sink.events("execution_interrupted")[0][1]
    assert msg["node_id"] == "w" and msg["executed"] == ["c"] and msg["node_type"] == "WaitForInterrupt"
    assert not executor.success
    await run(g.finalize(), executor)
    assert "c" in sink.events("execution_cached")[0][1]["nodes"]


async def test_progress_bar_sends_progress_and_state(run, sink):
    g = GraphBuilder(prefix="")
    g.node("Output", "o", value=g.node("Progress", "p", value=1.0, steps=3).out(0))
    await run(g.finalize())
    progress = [d for e, d in sink.events("progress")]
    assert [(d["value"], d["max"], d["node"]) for d in progress] == [(1, 3, "p"), (2, 3, "p"), (3, 3, "p")]
    running = [d["nodes"]["p"] for e, d in sink.events("progress_state") if d["nodes"].get("p", {}).get("value") == 2]
    assert running and running[0]["state"] == "running"
