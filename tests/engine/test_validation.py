"""validate_prompt: error types, node_errors shapes, coercions and big graphs."""

from __future__ import annotations

import time

import pytest

from comfy_bridge.validation import validate_node_input, validate_prompt


def node(cls: str, **inputs) -> dict:
    return {"class_type": cls, "inputs": inputs}


async def check(registry, prompt, targets=None):
    return await validate_prompt(registry, "pid", prompt, targets)


async def test_missing_class_and_unknown_class(registry):
    ok, error, outs, errs = await check(registry, {"1": {"inputs": {}}})
    assert (ok, error["type"], error["details"], errs) == (False, "invalid_prompt", "Node ID '#1'", {})
    ok, error, _, _ = await check(registry, {"1": node("Nope")})
    assert error["message"] == "Cannot execute because node Nope does not exist."


async def test_no_outputs_and_empty_partial_targets(registry):
    ok, error, _, _ = await check(registry, {"1": node("Const", value=1.0)})
    assert error["type"] == "prompt_no_outputs"
    prompt = {"1": node("Const", value=1.0), "2": node("Output", value=["1", 0])}
    ok, error, _, _ = await check(registry, prompt, targets=[])
    assert error["type"] == "prompt_no_outputs"
    ok, _, outs, _ = await check(registry, {**prompt, "3": node("Output", value=["1", 0])}, targets=["3", "1"])
    assert ok and outs == ["3"]


async def test_coercion_is_written_back(registry):
    prompt = {
        "1": node("Picker", choice="red", count="8", ratio="2.5", name=5, flag="false"),
        "2": node("Output", value=["1", 0]),
    }
    ok, _, _, _ = await check(registry, prompt)
    assert ok
    assert prompt["1"]["inputs"] == {"choice": "red", "count": 8, "ratio": 2.5, "name": "5", "flag": True}


async def test_node_level_reasons(registry):
    prompt = {"1": node("Picker", choice="blue", count="x", ratio=1.0, name="n"), "2": node("Output", value=["1", 0])}
    ok, error, outs, errs = await check(registry, prompt)
    assert not ok and error["type"] == "prompt_outputs_failed_validation" and error["details"] == ""
    reasons = {r["type"]: r for r in errs["1"]["errors"]}
    assert set(reasons) == {"value_not_in_list", "invalid_input_type", "required_input_missing"}
    assert reasons["value_not_in_list"]["details"] == "choice: 'blue' not in ['red', 'green']"
    assert reasons["required_input_missing"]["extra_info"] == {"input_name": "flag"}
    assert errs["1"]["dependent_outputs"] == ["2"] and errs["1"]["class_type"] == "Picker"
    assert "2" not in errs  # invalid only because of upstream


async def test_min_max_and_type_mismatch(registry):
    prompt = {
        "1": node("Const", value=11.0),
        "i": node("Image", value=0.0, size=4),
        "2": node("Output", value=["1", 0]),
        "3": node("Double", value=["i", 0]),
        "4": node("Output", value=["3", 0]),
    }
    ok, error, _, errs = await check(registry, prompt)
    assert errs["1"]["errors"][0]["type"] == "value_bigger_than_max"
    assert errs["1"]["errors"][0]["message"] == "Value 11.0 bigger than max of 10.0"
    mismatch = errs["3"]["errors"][0]
    assert mismatch["type"] == "return_type_mismatch"
    assert mismatch["details"] == "value, received_type(IMAGE) mismatch input_type(FLOAT)"
    assert mismatch["extra_info"]["linked_node"] == ["i", 0]


async def test_union_and_wildcard_types(registry):
    prompt = {
        "i": node("Image", value=0.0, size=4),
        "c": node("Const", value=1.0),
        "a": node("Add", a=["i", 0], b=["c", 0]),
        "o": node("Output", value=["a", 0]),
    }
    assert (await check(registry, prompt))[0]
    assert validate_node_input("IMAGE", "IMAGE,FLOAT") and not validate_node_input("INT", "IMAGE,FLOAT")
    assert validate_node_input("STRING", "*") and not validate_node_input("INT,STRING", "INT", strict=True)
    # a combo output's type is its options (today's GetVideoComponents' bit_depth): it feeds a combo input
    assert validate_node_input([], "COMBO") and validate_node_input(["a", "b"], "COMBO")
    assert not validate_node_input([], "INT")


async def test_custom_validation_reasons_and_skipped_range(registry):
    prompt = {
        "c": node("Const", value=1.0),
        "1": node("Checked", value=7.0, other=["c", 0]),
        "2": node("Output", value=["1", 0]),
    }
    ok, _, _, errs = await check(registry, prompt)
    details = sorted(r["details"] for r in errs["1"]["errors"])
    # value 7 is above max 5 but the validator takes `value`, so only its own verdict counts
    assert details == ["other - sevens are not allowed", "value - sevens are not allowed"]
    prompt["1"]["inputs"]["value"] = 4.0
    assert (await check(registry, prompt))[0]


async def test_input_types_validator_sees_linked_types(registry):
    ok_prompt = {
        "c": node("Const", value=1.0),
        "t": node("TypeChecked", value=["c", 0]),
        "o": node("Output", value=["t", 0]),
    }
    assert (await check(registry, ok_prompt))[0]
    bad = {
        "i": node("Image", value=0.0, size=4),
        "t": node("TypeChecked", value=["i", 0]),
        "o": node("Output", value=["t", 0]),
    }
    ok, _, _, errs = await check(registry, bad)
    assert errs["t"]["errors"][0]["details"] == "input_types - got IMAGE"


async def test_missing_upstream_node_fails_only_its_output(registry):
    prompt = {"c": node("Const", value=1.0), "a": node("Output", value=["c", 0]), "b": node("Output", value=["99", 0])}
    ok, error, outs, errs = await check(registry, prompt)
    assert ok and outs == ["a"]
    assert errs["b"]["errors"][0]["type"] == "exception_during_validation"
    assert errs["b"]["errors"][0]["extra_info"]["exception_type"] == "KeyError"


async def test_static_cycle_is_rejected_like_comfyui(registry):
    prompt = {
        "a": node("Add", a=["b", 0], b=["b", 0]),
        "b": node("Add", a=["a", 0], b=["a", 0]),
        "o": node("Output", value=["a", 0]),
    }
    ok, error, outs, errs = await check(registry, prompt)
    assert (ok, error["type"], error["details"], errs) == (False, "prompt_outputs_failed_validation", "", {})


async def test_literal_list_wrapped_in_value_key(registry):
    prompt = {"o": node("Output", value={"__value__": [1, 2, 3]})}
    assert (await check(registry, prompt))[0] and prompt["o"]["inputs"]["value"] == [1, 2, 3]
    ok, _, _, errs = await check(registry, {"o": node("Output", value=[1, 2, 3])})
    assert errs["o"]["errors"][0]["type"] == "bad_linked_input"


@pytest.mark.parametrize("n", [5000])
async def test_deep_chain_validates_fast_without_recursion(registry, n):
    prompt = {"0": node("Const", value=1.0)}
    for i in range(1, n):
        prompt[str(i)] = node("Double", value=[str(i - 1), 0])
    prompt["out"] = node("Output", value=[str(n - 1), 0])
    start = time.monotonic()
    ok, _, outs, _ = await check(registry, prompt)
    assert ok and outs == ["out"]
    assert time.monotonic() - start < 5.0
