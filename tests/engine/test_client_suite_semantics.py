"""Engine rules that client test suites (such as ComfyUI's execution tests) depend on: partial execution
targets, expansions mixed with plain results, loops built from nested expansions with raw links, undeclared
linked inputs, output nodes sharing an input, and asynchronous input validation."""

from __future__ import annotations

import asyncio

import pytest

from comfy_bridge.execution.graph_utils import GraphBuilder
from comfy_bridge.validation import validate_prompt


class Show:
    """An output node without UNIQUE_ID: its cache signature ignores the node id."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("FLOAT",)}}

    RETURN_TYPES = ()
    FUNCTION = "run"
    OUTPUT_NODE = True

    def run(self, value):
        return {"ui": {"shown": [value]}}


class ShowAndPass(Show):
    """An output node that also has a socket output."""

    RETURN_TYPES = ("FLOAT",)

    def run(self, value):
        return {"ui": {"shown": [value]}, "result": (value + 1,)}


class HalfExpand:
    """Per list item: values above 1 expand into a Double node, the others are returned directly."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("FLOAT",)}}

    RETURN_TYPES = ("FLOAT",)
    FUNCTION = "run"

    def run(self, value):
        if value <= 1:
            return (value,)
        g = GraphBuilder()
        return {"result": (g.node("Double", value=value).out(0),), "expand": g.finalize()}


class DoubleUntil:
    """A loop: doubles `value` through nested expansions until it reaches `limit`; `origin` arrives as the
    raw link and is resolved through DYNPROMPT to name the node the loop started from."""

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"value": ("FLOAT",), "limit": ("FLOAT",), "origin": ("FLOAT", {"rawLink": True})},
            "optional": {"fail_at": ("FLOAT", {"default": -1.0})},
            "hidden": {"dynprompt": "DYNPROMPT", "unique_id": "UNIQUE_ID"},
        }

    RETURN_TYPES = ("STRING",)
    FUNCTION = "run"

    def run(self, value, limit, origin, dynprompt, unique_id, fail_at=-1.0):
        assert isinstance(origin, list) and len(origin) == 2, origin  # the link itself, not its value
        if value == fail_at:
            raise ValueError(f"stopped at {value}")
        if value >= limit:
            return (f"{value}:{dynprompt.get_node(origin[0])['class_type']}",)
        g = GraphBuilder()
        doubled = g.node("Double", value=value)
        again = g.node("DoubleUntil", value=doubled.out(0), limit=limit, origin=origin, fail_at=fail_at)
        return {"result": (again.out(0),), "expand": g.finalize()}


class ShowText:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"text": ("STRING", {"forceInput": True})}}

    RETURN_TYPES = ()
    FUNCTION = "run"
    OUTPUT_NODE = True

    def run(self, text):
        return {"ui": {"text": [text]}}


class SumKwargs:
    """Declares nothing: whatever is linked arrives as keyword arguments."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ("FLOAT",)
    FUNCTION = "run"

    def run(self, **kwargs):
        return (float(sum(kwargs.values())),)


class AsyncChecked:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("FLOAT",)}}

    RETURN_TYPES = ("FLOAT",)
    FUNCTION = "run"

    @classmethod
    async def VALIDATE_INPUTS(cls, value):
        await asyncio.sleep(0.01)
        return True if value >= 0 else "negative values are refused"

    def run(self, value):
        return (value,)


@pytest.fixture(autouse=True)
def _nodes(registry):
    registry.add_builtin(
        {c.__name__: c for c in (Show, ShowAndPass, HalfExpand, DoubleUntil, ShowText, SumKwargs, AsyncChecked)}
    )


async def test_partial_targets_run_only_their_own_ancestors(run, sink):
    g = GraphBuilder(prefix="")
    g.node("Show", "o1", value=g.node("Const", "c1", value=1.0).out(0))
    g.node("Show", "o2", value=g.node("Const", "c2", value=2.0).out(0))
    g.node("Show", "o3", value=g.node("Const", "c3", value=3.0).out(0))
    executor = await run(g.finalize(), targets=["o1", "o3"])
    assert set(sink.executing()) == {"c1", "o1", "c3", "o3"}
    assert set(executor.history_result["outputs"]) == {"o1", "o3"}


async def test_untargeted_output_node_runs_when_a_target_needs_it(run, sink):
    g = GraphBuilder(prefix="")
    first = g.node("ShowAndPass", "first", value=g.node("Const", "c", value=1.0).out(0))
    second = g.node("ShowAndPass", "second", value=first.out(0))
    g.node("Show", "end", value=second.out(0))
    g.node("Show", "beside", value=first.out(0))
    executor = await run(g.finalize(), targets=["end"])
    assert [n for n in sink.executing() if n] == ["c", "first", "second", "end"]
    assert executor.history_result["outputs"]["end"] == {"shown": [3.0]}
    assert "beside" not in executor.history_result["outputs"]


async def test_partial_target_behind_a_lazy_switch_skips_the_unpicked_branch(run, sink):
    g = GraphBuilder(prefix="")
    a, b = g.node("Const", "a", value=1.0), g.node("Const", "b", value=2.0)
    sw = g.node("LazySwitch", "sw", pick_a=True, a=a.out(0), b=b.out(0))
    g.node("Show", "picked", value=sw.out(0))
    g.node("Show", "other", value=g.node("Double", "d", value=b.out(0)).out(0))
    executor = await run(g.finalize(), targets=["picked"])
    ran = set(sink.executing())
    assert {"a", "sw", "picked"} <= ran and not ran & {"b", "d", "other"}
    assert executor.history_result["outputs"]["picked"] == {"shown": [1.0]}


async def test_list_items_mix_expansions_and_plain_results_in_order(run):
    g = GraphBuilder(prefix="")
    each = g.node("HalfExpand", "h", value=g.node("MakeList", "l", count=4).out(0))
    g.node("Show", "o", value=each.out(0))
    executor = await run(g.finalize())
    assert executor.history_result["outputs"]["o"] == {"shown": [0.0, 1.0, 4.0, 6.0]}


async def test_loop_of_nested_expansions_sees_raw_link_and_reports_under_top_node(run, sink):
    g = GraphBuilder(prefix="")
    start = g.node("Const", "start", value=1.0)
    loop = g.node("DoubleUntil", "loop", value=start.out(0), limit=8.0, origin=start.out(0))
    g.node("ShowText", "o", text=loop.out(0))
    executor = await run(g.finalize())
    assert executor.history_result["outputs"]["o"] == {"text": ["8.0:Const"]}
    nested = [d for e, d in sink.events("executing") if d["node"] and d["node"].startswith("loop.")]
    assert len({d["node"] for d in nested}) == 6  # three rounds of one Double and one DoubleUntil
    assert {d["display_node"] for d in nested} == {"loop"}


async def test_error_deep_inside_a_loop_is_blamed_on_the_top_node(run, sink):
    g = GraphBuilder(prefix="")
    start = g.node("Const", "start", value=1.0)
    loop = g.node("DoubleUntil", "loop", value=start.out(0), limit=64.0, origin=start.out(0), fail_at=4.0)
    g.node("ShowText", "o", text=loop.out(0))
    await run(g.finalize())
    (error,) = [d for e, d in sink.events("execution_error")]
    assert error["node_id"] == "loop" and "stopped at 4.0" in error["exception_message"]


async def test_undeclared_links_are_passed_and_undeclared_constants_dropped(run):
    prompt = {
        "a": {"class_type": "Const", "inputs": {"value": 1.5}},
        "b": {"class_type": "Const", "inputs": {"value": 2.0}},
        "s": {"class_type": "SumKwargs", "inputs": {"x": ["a", 0], "y": ["b", 0], "ignored": 100.0}},
        "o": {"class_type": "Show", "inputs": {"value": ["s", 0]}},
    }
    executor = await run(prompt)
    assert executor.history_result["outputs"]["o"] == {"shown": [3.5]}


async def test_two_output_nodes_fed_the_same_value_each_report_it(run, sink):
    g = GraphBuilder(prefix="")
    c = g.node("Const", "c", value=0.5)
    g.node("Show", "o1", value=c.out(0))
    g.node("Show", "o2", value=c.out(0))
    executor = await run(g.finalize())
    assert executor.history_result["outputs"] == {"o1": {"shown": [0.5]}, "o2": {"shown": [0.5]}}
    assert sorted(d["node"] for e, d in sink.events("executed")) == ["o1", "o2"]


async def test_async_validate_inputs_is_awaited(registry):
    def prompt(value: float) -> dict:
        return {
            "1": {"class_type": "AsyncChecked", "inputs": {"value": value}},
            "2": {"class_type": "Show", "inputs": {"value": ["1", 0]}},
        }

    ok, _, outputs, _ = await validate_prompt(registry, "p", prompt(1.0), None)
    assert ok and outputs == ["2"]
    ok, error, _, node_errors = await validate_prompt(registry, "p", prompt(-1.0), None)
    assert not ok and error["type"] == "prompt_outputs_failed_validation"
    (reason,) = node_errors["1"]["errors"]
    assert reason["type"] == "custom_validation_failed" and "negative values are refused" in reason["details"]
