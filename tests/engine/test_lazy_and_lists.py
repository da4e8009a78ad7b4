"""Lazy inputs, INPUT_IS_LIST / OUTPUT_IS_LIST mapping and ExecutionBlocker."""

from __future__ import annotations

import engine_nodes
import pytest

from comfy_bridge.execution.graph_utils import GraphBuilder


@pytest.mark.parametrize("node", ["LazySwitch", "AsyncLazySwitch"])
@pytest.mark.parametrize("pick_a", [True, False])
async def test_unrequested_lazy_input_never_runs(run, sink, node, pick_a):
    g = GraphBuilder(prefix="")
    a = g.node("Double", "a", value=g.node("Const", "ca", value=1.0).out(0))
    b = g.node("Const", "b", value=10.0)
    sw = g.node(node, "sw", pick_a=pick_a, a=a.out(0), b=b.out(0))
    g.node("Output", "o", value=sw.out(0))
    await run(g.finalize())
    ran = sink.executing()
    assert ("a" in ran) is pick_a and ("b" in ran) is (not pick_a)
    assert ran.count("sw") == 2  # re-attempted after the requested input ran
    assert sink.events("executed")[0][1]["output"] == {"values": [2.0 if pick_a else 10.0]}


async def test_list_output_maps_downstream_and_list_input_gathers(run, sink):
    g = GraphBuilder(prefix="")
    lst = g.node("MakeList", "l", count=4)
    d = g.node("Double", "d", value=lst.out(0))
    g.node("Output", "each", value=d.out(0))
    g.node("Output", "total", value=g.node("SumList", "s", values=d.out(0)).out(0))
    executor = await run(g.finalize())
    assert engine_nodes.CALLS.count("Double") == 4
    assert executor.history_result["outputs"]["each"] == {"values": [0.0, 2.0, 4.0, 6.0]}
    assert executor.history_result["outputs"]["total"] == {"values": [12.0]}


async def test_shorter_list_repeats_its_last_item(run):
    g = GraphBuilder(prefix="")
    s = g.node("Add", "s", a=g.node("MakeList", "l", count=3).out(0), b=g.node("Const", "c", value=10.0).out(0))
    g.node("Output", "o", value=s.out(0))
    executor = await run(g.finalize())
    assert executor.history_result["outputs"]["o"] == {"values": [10.0, 11.0, 12.0]}


async def test_blocked_list_item_is_dropped_silently(run, sink):
    g = GraphBuilder(prefix="")
    blk = g.node("Blocker", "b", value=g.node("MakeList", "l", count=3).out(0), block_at=1.0, message="")
    g.node("Output", "o", value=blk.out(0))
    executor = await run(g.finalize())
    assert executor.history_result["outputs"]["o"] == {"values": [0.0, 2.0]}
    assert sink.events("execution_error") == [] and executor.success


async def test_blocker_message_reports_error_and_prompt_continues(run, sink):
    g = GraphBuilder(prefix="")
    blk = g.node("Blocker", "b", value=g.node("Const", "c", value=1.0).out(0), block_at=1.0, message="stop here")
    g.node("Output", "blocked", value=blk.out(0))
    g.node("Output", "free", value=g.node("Const", "k", value=4.0).out(0))
    executor = await run(g.finalize())
    errors = sink.events("execution_error")
    assert len(errors) == 1
    assert errors[0][1]["exception_message"] == "Execution Blocked: stop here"
    assert errors[0][1]["exception_type"] == "ExecutionBlocked" and errors[0][1]["node_id"] == "blocked"
    assert sink.events("execution_success")
    assert "blocked" not in executor.history_result["outputs"]
    assert executor.history_result["outputs"]["free"] == {"values": [4.0]}
