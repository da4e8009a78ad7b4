"""Message sequences and execution order, as a websocket client sees them."""

from __future__ import annotations

import engine_nodes

from comfy_bridge.execution.graph_utils import GraphBuilder


def simple_prompt() -> dict:
    g = GraphBuilder(prefix="")
    c = g.node("Const", "A", value=1.5)
    g.node("Output", "B", value=c.out(0))
    return g.finalize()


async def test_first_run_sends_comfyui_sequence(run, sink):
    await run(simple_prompt())
    names = [e for e, _ in sink.events()]
    assert names == [
        "execution_start",
        "execution_cached",
        "progress_state",
        "executing",
        "progress_state",
        "progress_state",
        "executing",
        "executed",
        "progress_state",
        "execution_success",
    ]
    executed = sink.events("executed")[0][1]
    assert executed == {"node": "B", "display_node": "B", "output": {"values": [1.5]}, "prompt_id": "p1"}
    assert sink.events("execution_cached")[0][1]["nodes"] == []
    last_state = sink.events("progress_state")[-1][1]["nodes"]
    assert {k: v["state"] for k, v in last_state.items()} == {"A": "finished", "B": "finished"}
    assert all(sid == "client" for _, _, sid in sink.messages)


async def test_cached_rerun_only_reports_outputs(run, sink):
    executor = await run(simple_prompt())
    await run(simple_prompt(), executor)
    names = [e for e, _ in sink.events()]
    assert names == ["execution_start", "execution_cached", "executed", "progress_state", "execution_success"]
    assert sorted(sink.events("execution_cached")[0][1]["nodes"]) == ["A", "B"]
    assert sink.events("executed")[0][1]["output"] == {"values": [1.5]}
    assert executor.history_result["outputs"] == {"B": {"values": [1.5]}}
    assert executor.history_result["meta"]["B"]["display_node"] == "B"


async def test_no_client_id_suppresses_client_messages(run, sink):
    executor = await run(simple_prompt(), client_id=None)
    names = {e for e, _ in sink.events()}
    assert "executing" not in names and "execution_start" not in names
    assert "progress_state" in names  # broadcast (sid None)
    assert executor.status_messages[0][0] == "execution_start"
    assert executor.success


async def test_output_node_feeders_run_first(run, sink):
    g = GraphBuilder(prefix="")
    a = g.node("Const", "a", value=1.0)
    b = g.node("Const", "b", value=2.0)
    s = g.node("Add", "s", a=a.out(0), b=b.out(0))
    g.node("Output", "o", value=s.out(0))
    await run(g.finalize())
    assert sink.executing() == ["b", "a", "s", "o"]
    assert sink.events("executed")[0][1]["output"] == {"values": [3.0]}


async def test_v3_node_runs_with_hidden_unique_id(run, sink):
    g = GraphBuilder(prefix="")
    v = g.node("V3Scale", "v", value=2.0, mode="triple")
    g.node("V3AsyncOutput", "o", value=v.out(0))
    await run(g.finalize())
    assert engine_nodes.CALLS == ["V3Scale:v"]
    assert sink.events("executed")[0][1]["output"] == {"values": [6.0]}
