"""Cross-prompt caching by input signature, IS_CHANGED, and the three cache modes."""

from __future__ import annotations

import engine_nodes
import pytest

from comfy_bridge.execution.graph_utils import GraphBuilder


def chain(value: float, extra: float = 0.0, always: bool = False) -> dict:
    g = GraphBuilder(prefix="")
    a = g.node("Const", "a", value=value)
    c = g.node("Changing", "c", value=a.out(0), always=always)
    b = g.node("Const", "b", value=extra)
    s = g.node("Add", "s", a=c.out(0), b=b.out(0))
    g.node("Output", "o", value=s.out(0))
    return g.finalize()


async def test_changed_constant_reruns_only_downstream(run, sink):
    executor = await run(chain(1.0, extra=0.0))
    await run(chain(1.0, extra=5.0), executor)
    assert sorted(sink.executing()) == ["b", "o", "s"]
    assert sorted(sink.events("execution_cached")[0][1]["nodes"]) == ["a", "c"]
    assert sink.events("executed")[0][1]["output"] == {"values": [6.0]}


async def test_is_changed_nan_always_reruns(run, sink):
    executor = await run(chain(1.0, always=True))
    await run(chain(1.0, always=True), executor)
    assert "c" in sink.executing() and "a" not in sink.executing()


async def test_same_signature_under_new_ids_is_a_hit(run, sink):
    executor = await run(chain(2.0))
    g = GraphBuilder(prefix="")
    a = g.node("Const", "x", value=2.0)
    g.node("Output", "y", value=a.out(0))
    await run(g.finalize(), executor)
    assert "x" in sink.events("execution_cached")[0][1]["nodes"]


@pytest.mark.parametrize("mode,size,reused", [("classic", 0, False), ("lru", 10, True), ("none", 0, False)])
async def test_cache_modes_keep_or_drop_unrelated_results(run, sink, make_executor, mode, size, reused):
    executor = make_executor(mode, size)
    await run(chain(1.0), executor)
    other = GraphBuilder(prefix="")
    other.node("Output", "z", value=other.node("Const", "q", value=9.0).out(0))
    await run(other.finalize(), executor)  # classic drops everything prompt 1 had; LRU keeps it
    await run(chain(1.0), executor)
    assert (sink.executing() == []) is reused


async def test_cache_none_does_not_reuse_between_prompts(run, sink, make_executor):
    executor = make_executor("none")
    await run(chain(1.0), executor)
    await run(chain(1.0), executor)
    assert sorted(sink.executing()) == ["a", "b", "c", "o", "s"]


async def test_reset_drops_all_results(run, sink):
    executor = await run(chain(1.0))
    executor.reset()
    await run(chain(1.0), executor)
    assert len(sink.executing()) == 5


async def test_unhashable_constant_never_matches(run, sink, registry):
    g = GraphBuilder(prefix="")
    g.node("Output", "o", value=object())  # not JSON: only expansion graphs can hold these
    prompt = g.finalize()
    executor = await run(prompt)
    await run(prompt, executor)
    assert sink.executing() == ["o"]
    assert engine_nodes.CALLS.count("Output") == 2
