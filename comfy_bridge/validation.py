"""Prompt validation with ComfyUI's rules, error types and node_errors shapes.

The per-node check walks upstream through links. ComfyUI recurses; here each node's check is a
generator driven from an explicit stack (`_drive`), so 5,000-deep chains validate without touching the
recursion limit, and a static cycle is detected instead of exhausting it. The observable results are
ComfyUI's, including for cycles (the outputs fail with empty details and no node_errors).
"""

from __future__ import annotations

import inspect
import logging
import sys
import traceback
from collections.abc import Generator
from typing import Any

from comfy_bridge.execution.graph import get_input_info
from comfy_bridge.execution.graph_utils import ExecutionBlocker
from comfy_bridge.execution.node_call import get_input_data, map_node_over_list, resolve_results
from comfy_bridge.execution.nodeapi import custom_function, input_types, is_v3
from comfy_bridge.execution.prompt_executor import full_type_name
from nodes.model_checks import model_file_problem

log = logging.getLogger(__name__)

WIDGET_CONVERSIONS = (("INT", int), ("FLOAT", float), ("STRING", str), ("BOOLEAN", bool))
MATCH_TYPE = "COMFY_MATCHTYPE_V3"
# A group of inputs that grows (V3 Autogrow): the prompt holds its items (`values.a`), never the group itself.
AUTOGROW = "COMFY_AUTOGROW_V3"


def validate_node_input(received_type: Any, input_type: Any, strict: bool = False) -> bool:
    """Can an output of `received_type` feed an input of `input_type`?

    `!=` is used on purpose: str subclasses (IO.ANY, AnyType packs) override it to match anything.
    A plain "*" is a wildcard too, and comma-separated types match when they share a member
    (strict: when every received type is accepted).
    """
    if not received_type != input_type:
        return True
    if received_type == "*" or input_type == "*":
        return True
    if MATCH_TYPE in (received_type, input_type):
        return True  # a V3 MatchType socket: the frontend resolves which type it takes
    if isinstance(received_type, list) and input_type == "COMBO":
        return True  # a combo output (its type is its options) feeds a V3 combo input, as today's ComfyUI allows
    if not isinstance(received_type, str) or not isinstance(input_type, str):
        return False
    received = {t.strip() for t in received_type.split(",")}
    accepted = {t.strip() for t in input_type.split(",")}
    return received <= accepted if strict else bool(received & accepted)


class _Request:
    """What a node check asks its driver for: another node's result, or an awaited coroutine."""

    def __init__(self, kind: str, arg: Any):
        self.kind, self.arg = kind, arg


def _reason(type_: str, message: str, details: str, **extra: Any) -> dict:
    return {"type": type_, "message": message, "details": details, "extra_info": extra}


def _check_node(
    registry: Any, prompt_id: str, prompt: dict, unique_id: str, validated: dict
) -> Generator[_Request, Any, tuple]:
    if unique_id in validated:
        return validated[unique_id]
    inputs = prompt[unique_id]["inputs"]
    obj_class = registry.classes[prompt[unique_id]["class_type"]]
    v3 = is_v3(obj_class)
    class_inputs = input_types(obj_class, live_inputs=inputs if v3 else None)
    declared = list(dict.fromkeys([*class_inputs.get("required", {}), *class_inputs.get("optional", {})]))
    errors: list[dict] = []
    valid = True

    validate_name, validate_fn = custom_function(obj_class, "VALIDATE_INPUTS")
    validate_args: list[str] = []
    validate_kwargs = False
    if validate_fn is not None:
        spec = inspect.getfullargspec(validate_fn)
        validate_args, validate_kwargs = spec.args, spec.varkw is not None
    received_types: dict[str, Any] = {}

    for x in declared:
        input_type, category, extra_info = get_input_info(obj_class, x, class_inputs)
        if x not in inputs:
            if category == "required" and input_type != AUTOGROW:
                # A V3 node's details name the input itself, not its dotted path under a dynamic input.
                details = x.split(".")[-1] if v3 else x
                errors.append(_reason("required_input_missing", "Required input is missing", details, input_name=x))
            continue
        val = inputs[x]
        info = (input_type, extra_info)
        if isinstance(val, list):
            if len(val) != 2:
                errors.append(
                    _reason(
                        "bad_linked_input",
                        "Bad linked input, must be a length-2 list of [node_id, slot_index]",
                        f"{x}",
                        input_name=x,
                        input_config=info,
                        received_value=val,
                    )
                )
                continue
            o_id = val[0]
            received_type = registry.classes[prompt[o_id]["class_type"]].RETURN_TYPES[val[1]]
            received_types[x] = received_type
            if "input_types" not in validate_args and not validate_node_input(received_type, input_type):
                errors.append(
                    _reason(
                        "return_type_mismatch",
                        "Return type mismatch between linked nodes",
                        f"{x}, received_type({received_type}) mismatch input_type({input_type})",
                        input_name=x,
                        input_config=info,
                        received_type=received_type,
                        linked_node=val,
                    )
                )
                continue
            try:
                upstream = yield _Request("validate", o_id)
                if upstream[0] is False:
                    valid = False
                    continue
            except Exception as ex:
                typ, _, tb = sys.exc_info()
                valid = False
                validated[o_id] = (
                    False,
                    [
                        _reason(
                            "exception_during_inner_validation",
                            "Exception when validating inner node",
                            str(ex),
                            input_name=x,
                            input_config=info,
                            exception_message=str(ex),
                            exception_type=full_type_name(typ),
                            traceback=traceback.format_tb(tb),
                            linked_node=val,
                        )
                    ],
                    o_id,
                )
                continue
        else:
            try:
                # {"__value__": [...]} carries a literal list (bare lists mean links).
                if isinstance(val, dict) and "__value__" in val:
                    val = inputs[x] = val["__value__"]
                # One test after another, with ==, as ComfyUI does: a pack's wildcard type that equals every
                # name (AlwaysEqualProxy("*")) gets each conversion in turn, ending as a bool.
                for name, convert in WIDGET_CONVERSIONS:
                    if input_type == name:
                        val = inputs[x] = convert(val)
            except Exception as ex:
                errors.append(
                    _reason(
                        "invalid_input_type",
                        f"Failed to convert an input value to a {input_type} value",
                        f"{x}, {val}, {ex}",
                        input_name=x,
                        input_config=info,
                        received_value=val,
                        exception_message=str(ex),
                    )
                )
                continue
            if x not in validate_args and not validate_kwargs:
                if "min" in extra_info and val < extra_info["min"]:
                    errors.append(
                        _reason(
                            "value_smaller_than_min",
                            f"Value {val} smaller than min of {extra_info['min']}",
                            f"{x}",
                            input_name=x,
                            input_config=info,
                            received_value=val,
                        )
                    )
                    continue
                if "max" in extra_info and val > extra_info["max"]:
                    errors.append(
                        _reason(
                            "value_bigger_than_max",
                            f"Value {val} bigger than max of {extra_info['max']}",
                            f"{x}",
                            input_name=x,
                            input_config=info,
                            received_value=val,
                        )
                    )
                    continue
                if isinstance(input_type, list) and val not in input_type:
                    big = len(input_type) > 20  # don't echo long model lists back
                    list_info = f"(list of length {len(input_type)})" if big else str(input_type)
                    errors.append(
                        _reason(
                            "value_not_in_list",
                            "Value not in list",
                            f"{x}: '{val}' not in {list_info}",
                            input_name=x,
                            input_config=None if big else info,
                            received_value=val,
                        )
                    )
                    continue
            # A model file that cannot be used is refused now, as a custom validation failure, rather than
            # seconds into the run (nodes.model_checks reads only the file's header, once per file version).
            problem = model_file_problem(obj_class, x, val)
            if problem is not None:
                errors.append(
                    _reason(
                        "custom_validation_failed",
                        "Custom validation failed for node",
                        f"{x} - {problem}",
                        input_name=x,
                    )
                )
                continue

    if validate_args or validate_kwargs:
        data, _, hidden = get_input_data(inputs, obj_class, unique_id)
        passed = {k: v for k, v in data.items() if k in validate_args or validate_kwargs}
        if "input_types" in validate_args:
            passed["input_types"] = [received_types]
        returned = yield _Request(
            "await", _call_validator(prompt_id, unique_id, obj_class, passed, validate_name, hidden)
        )
        for x in passed:
            for r in returned:
                if r is not True and not isinstance(r, ExecutionBlocker):
                    details = f"{x}" if r is False else f"{x} - {r}"
                    errors.append(
                        _reason("custom_validation_failed", "Custom validation failed for node", details, input_name=x)
                    )

    result = (False, errors, unique_id) if errors or valid is not True else (True, [], unique_id)
    validated[unique_id] = result
    return result


async def _call_validator(
    prompt_id: str, unique_id: str, obj_class: type, passed: dict, name: str, hidden: dict
) -> list:
    return await resolve_results(
        await map_node_over_list(prompt_id, unique_id, obj_class, passed, name, hidden_inputs=hidden)
    )


async def _drive(registry: Any, prompt_id: str, prompt: dict, root: str, validated: dict) -> tuple:
    """Run node checks with an explicit stack; exceptions travel to the requesting check like a raise would."""
    stack = [(root, _check_node(registry, prompt_id, prompt, root, validated))]
    on_stack = {root}
    send: Any = None
    throw: BaseException | None = None
    while True:
        node_id, gen = stack[-1]
        try:
            request = gen.throw(throw) if throw is not None else gen.send(send)
            throw = None
        except StopIteration as stop:
            stack.pop()
            on_stack.discard(node_id)
            if not stack:
                return stop.value
            send, throw = stop.value, None
            continue
        except Exception as ex:
            stack.pop()
            on_stack.discard(node_id)
            if not stack:
                raise
            send, throw = None, ex
            continue
        if request.kind == "await":
            try:
                send = await request.arg
            except Exception as ex:
                send, throw = None, ex
        elif request.arg in on_stack:
            # ComfyUI recurses around a static cycle until RecursionError; end the same way, at once.
            send, throw = None, RecursionError(f"dependency cycle through node {request.arg}")
        else:
            stack.append((request.arg, _check_node(registry, prompt_id, prompt, request.arg, validated)))
            on_stack.add(request.arg)
            send = None


async def validate_inputs(registry: Any, prompt_id: str, prompt: dict, node_id: str, validated: dict) -> tuple:
    """(ok, reasons, node_id) for one node and, through links, everything upstream (memoised in `validated`)."""
    return await _drive(registry, prompt_id, prompt, node_id, validated)


async def validate_prompt(
    registry: Any, prompt_id: str, prompt: dict, partial_execution_targets: list[str] | None
) -> tuple[bool, dict | None, list[str], dict]:
    """(valid, error, outputs_to_execute, node_errors) exactly as ComfyUI's POST /prompt reports them."""
    outputs = []
    for x, node in prompt.items():
        if "class_type" not in node:
            return (
                False,
                _reason(
                    "invalid_prompt",
                    "Cannot execute because a node is missing the class_type property.",
                    f"Node ID '#{x}'",
                ),
                [],
                {},
            )
        cls = registry.classes.get(node["class_type"])
        if cls is None:
            return (
                False,
                _reason(
                    "invalid_prompt",
                    f"Cannot execute because node {node['class_type']} does not exist.",
                    f"Node ID '#{x}'",
                ),
                [],
                {},
            )
        if getattr(cls, "OUTPUT_NODE", False) is True and (
            partial_execution_targets is None or x in partial_execution_targets
        ):
            outputs.append(x)
    if not outputs:
        return False, _reason("prompt_no_outputs", "Prompt has no outputs", ""), [], {}

    good_outputs: list[str] = []
    failures: list[tuple[str, list]] = []
    node_errors: dict[str, dict] = {}
    validated: dict[str, tuple] = {}
    for o in outputs:
        try:
            valid, reasons, _ = await validate_inputs(registry, prompt_id, prompt, o, validated)
        except Exception as ex:
            typ, _, tb = sys.exc_info()
            valid = False
            reasons = [
                _reason(
                    "exception_during_validation",
                    "Exception when validating node",
                    str(ex),
                    exception_type=full_type_name(typ),
                    traceback=traceback.format_tb(tb),
                )
            ]
            validated[o] = (False, reasons, o)
        if valid is True:
            good_outputs.append(o)
            continue
        log.error("Failed to validate prompt for output %s:", o)
        for reason in reasons:
            log.error("  - %s: %s", reason["message"], reason["details"])
        failures.append((o, reasons))
        for node_id, (ok, node_reasons, _) in validated.items():
            # Nodes invalid only because of something upstream carry no reasons and are not listed.
            if ok is not True and node_reasons:
                if node_id not in node_errors:
                    node_errors[node_id] = {
                        "errors": node_reasons,
                        "dependent_outputs": [],
                        "class_type": prompt[node_id]["class_type"],
                    }
                node_errors[node_id]["dependent_outputs"].append(o)
        log.error("Output will be ignored")

    if not good_outputs:
        details = "\n".join(f"{r['message']}: {r['details']}" for _, reasons in failures for r in reasons)
        return (
            False,
            _reason("prompt_outputs_failed_validation", "Prompt outputs failed validation", details),
            [],
            node_errors,
        )
    return True, None, good_outputs, node_errors
