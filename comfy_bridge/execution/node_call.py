"""Calling a node: resolving its inputs to lists, mapping the function over them, merging results."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Callable
from typing import Any

import torch

from comfy_bridge.execution.graph import DynamicPrompt, get_input_info
from comfy_bridge.execution.graph_utils import ExecutionBlocker, GraphBuilder, is_link
from comfy_bridge.execution.node_context import ExecutionContext, current_executing_context
from comfy_bridge.execution.nodeapi import NodeOutputBase, bound_function, hidden_values, input_types, is_v3
from comfy_bridge.packs.remote import route
from nodes import progress
from nodes.core_calls import ENGINE_LOOP, IN_NODE_CALL

_V1_HIDDEN = {
    "PROMPT": lambda uid, dp, extra: dp.get_original_prompt() if dp is not None else {},
    "DYNPROMPT": lambda uid, dp, extra: dp,
    "EXTRA_PNGINFO": lambda uid, dp, extra: extra.get("extra_pnginfo"),
    "UNIQUE_ID": lambda uid, dp, extra: uid,
    "AUTH_TOKEN_COMFY_ORG": lambda uid, dp, extra: extra.get("auth_token_comfy_org"),
    "API_KEY_COMFY_ORG": lambda uid, dp, extra: extra.get("api_key_comfy_org"),
    "COMFY_USAGE_SOURCE": lambda uid, dp, extra: extra.get("comfy_usage_source"),
}


def get_input_data(
    inputs: dict,
    class_def: type,
    unique_id: str,
    outputs: Any = None,
    dynprompt: DynamicPrompt | None = None,
    extra_data: dict | None = None,
) -> tuple[dict[str, list], dict[str, bool], dict]:
    """Every input as a list of values; links read the source's cached output list.

    Returns (inputs, missing, v3_hidden): `missing` names links whose value is not available (yet).
    Undeclared constants are dropped; undeclared links are still passed.
    """
    extra_data = extra_data or {}
    v3 = is_v3(class_def)
    valid_inputs = input_types(class_def, include_hidden=not v3, live_inputs=inputs if v3 else None)
    accept_all = v3 and class_def.ACCEPT_ALL_INPUTS
    data: dict[str, list] = {}
    missing: dict[str, bool] = {}
    for name, value in inputs.items():
        _, category, info = get_input_info(class_def, name, valid_inputs)
        if is_link(value) and not (info and info.get("rawLink", False)):
            cached = outputs.get(value[0]) if outputs is not None else None
            if cached is None or value[1] >= len(cached):
                missing[name] = True
                data[name] = [None]
                continue
            data[name] = cached[value[1]]
        elif category is not None or accept_all:
            data[name] = [value]
    if v3:
        return data, missing, hidden_values(class_def, unique_id, dynprompt, extra_data, live_inputs=inputs)
    for name, kind in (valid_inputs.get("hidden") or {}).items():
        if isinstance(kind, str) and kind in _V1_HIDDEN:
            data[name] = [_V1_HIDDEN[kind](unique_id, dynprompt, extra_data)]
    return data, missing, {}


def _first_blocker(inputs: dict, input_is_list: bool) -> ExecutionBlocker | None:
    for value in inputs.values():
        if input_is_list:
            value = next((e for e in value if isinstance(e, ExecutionBlocker)), value)
        if isinstance(value, ExecutionBlocker):
            return value
    return None


def _call_sync(fn: Callable, kwargs: dict) -> Any:
    # inference_mode is thread-local: enter it in the worker thread that runs the node.
    with torch.inference_mode():
        return fn(**kwargs)


async def map_node_over_list(
    prompt_id: str,
    unique_id: str,
    obj: Any,
    input_data_all: dict[str, list],
    func: str,
    allow_interrupt: bool = False,
    execution_block_cb: Callable[[ExecutionBlocker], Any] | None = None,
    setup: Callable[[int], None] | None = None,
    hidden_inputs: dict | None = None,
    in_thread: bool = False,
) -> list:
    """Call `func` once per list item (or once with whole lists for INPUT_IS_LIST nodes).

    Items: element i of every input, or the last element of shorter lists. A blocker among the inputs
    replaces the call. Coroutines become tasks; those not finished after one loop turn are returned as
    pending tasks. Each call runs in its own context (executing node, GraphBuilder prefix, progress hook).
    """
    input_is_list = bool(getattr(obj, "INPUT_IS_LIST", False))
    max_len = max((len(v) for v in input_data_all.values()), default=0)
    results: list = []

    async def process(inputs: dict, index: int | None) -> None:
        if allow_interrupt:
            progress.throw_if_interrupted()
        blocker = _first_blocker(inputs, input_is_list)
        if blocker is not None:
            results.append(execution_block_cb(blocker) if execution_block_cb else blocker)
            return
        ctx = contextvars.copy_context()

        def enter() -> None:
            current_executing_context.set(ExecutionContext(prompt_id, unique_id, index))
            ENGINE_LOOP.set(asyncio.get_running_loop())  # where a sync node's calls of core nodes run
            IN_NODE_CALL.set(True)
            if setup is not None:
                setup(index or 0)
            GraphBuilder.set_default_prefix(unique_id, index or 0, 0)

        ctx.run(enter)
        fn = route(obj, func, hidden_inputs, bound_function(obj, func, hidden_inputs), unique_id, prompt_id)
        if inspect.iscoroutinefunction(fn):
            task = asyncio.get_running_loop().create_task(fn(**inputs), context=ctx)
            await asyncio.sleep(0)  # let it run to its first real suspension
            results.append(task.result() if task.done() else task)
        elif in_thread:
            results.append(await asyncio.get_running_loop().run_in_executor(None, ctx.run, _call_sync, fn, inputs))
        else:
            results.append(ctx.run(fn, **inputs))

    if input_is_list:
        await process(input_data_all, 0)
    elif max_len == 0:
        await process({}, None)
    else:
        for i in range(max_len):
            await process({k: v[i if len(v) > i else -1] for k, v in input_data_all.items()}, i)
    return results


async def resolve_results(results: list) -> list:
    """Wait for pending tasks among `results`; the first failure is raised."""
    pending = [r for r in results if isinstance(r, asyncio.Task) and not r.done()]
    if pending:
        done, _ = await asyncio.wait(pending)
        for task in done:
            if task.exception() is not None:
                raise task.exception()
    return [r.result() if isinstance(r, asyncio.Task) else r for r in results]


def merge_result_data(results: list, class_def: type) -> list[list]:
    """Per-call result tuples -> one list per output slot (OUTPUT_IS_LIST slots are concatenated)."""
    is_list = getattr(class_def, "OUTPUT_IS_LIST", None) or [False] * len(results[0])
    output = []
    for i, slot_is_list in zip(range(len(results[0])), is_list):
        if slot_is_list:
            value: list = []
            for r in results:
                if isinstance(r[i], ExecutionBlocker):
                    value.append(r[i])
                else:
                    value.extend(r[i])
            output.append(value)
        else:
            output.append([r[i] for r in results])
    return output


def _blocked(class_def: type, blocker: ExecutionBlocker) -> tuple:
    return tuple([blocker] * len(class_def.RETURN_TYPES))


def get_output_from_returns(return_values: list, class_def: type) -> tuple[Any, dict, bool]:
    """(outputs, ui, has_subgraph). With an expansion, outputs is [(graph or None, result)] per call."""
    results, uis, subgraph_results = [], [], []
    has_subgraph = False
    for r in return_values:
        if isinstance(r, dict):
            if "ui" in r:
                uis.append(r["ui"])
            result = r.get("result")
            if isinstance(result, ExecutionBlocker):
                result = _blocked(class_def, result)
            if "expand" in r:
                has_subgraph = True
                subgraph_results.append((r["expand"], result))
            elif "result" in r:
                results.append(result)
                subgraph_results.append((None, result))
        elif isinstance(r, NodeOutputBase):
            if r.ui is not None:
                uis.append(r.ui if isinstance(r.ui, dict) else r.ui.as_dict())
            result = r.result
            if r.block_execution is not None:
                result = _blocked(class_def, ExecutionBlocker(r.block_execution))
            if r.expand is not None:
                has_subgraph = True
                subgraph_results.append((r.expand, result))
            elif result is not None:
                results.append(result)
                subgraph_results.append((None, result))
        else:
            if isinstance(r, ExecutionBlocker):
                r = _blocked(class_def, r)
            results.append(r)
            subgraph_results.append((None, r))
    if has_subgraph:
        output: Any = subgraph_results
    elif results:
        output = merge_result_data(results, class_def)
    else:
        output = []
    ui = {k: [y for x in uis for y in x[k]] for k in uis[0]} if uis else {}
    return output, ui, has_subgraph


def format_value(x: Any) -> Any:
    """A value for error reports: JSON scalars as they are, anything else as str()."""
    if x is None or isinstance(x, (int, float, bool, str)):
        return x
    return str(x)
