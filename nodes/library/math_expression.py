"""Today's ComfyUI number nodes (added after 0.3.64): the Math Expression (`comfy_extras.nodes_math`), a
formula over a growing group of inputs `a`..`z`, evaluated by simpleeval (no Python `eval`: only names,
operators and the functions below), and the Number Convert (`comfy_extras.nodes_number_convert`)."""

from __future__ import annotations

import math
import string
from typing import Any

from simpleeval import simple_eval

from nodes.dynamic_inputs import DynamicSection, autogrow_names, group

# pow() is a plain call, outside simpleeval's guard on `**`: cap its exponent as ComfyUI does.
MAX_EXPONENT = 4000
VALUES = autogrow_names(
    "value", ("FLOAT,INT,BOOLEAN", {}), list(string.ascii_lowercase), minimum=1, optional_items=True
)


def _sum(*args: Any) -> Any:
    """sum(values) and sum(a, b, c) both."""
    return sum(args[0]) if len(args) == 1 and hasattr(args[0], "__iter__") else sum(args)


def _pow(base: Any, exponent: Any) -> Any:
    if abs(exponent) > MAX_EXPONENT:
        raise ValueError(f"pow(): the exponent {exponent} is larger than {MAX_EXPONENT}")
    return pow(base, exponent)


FUNCTIONS = {
    "sum": _sum,
    "min": min,
    "max": max,
    "abs": abs,
    "round": round,
    "pow": _pow,
    "sqrt": math.sqrt,
    "ceil": math.ceil,
    "floor": math.floor,
    "log": math.log,
    "log2": math.log2,
    "log10": math.log10,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "int": int,
    "float": float,
}


def evaluate(expression: str, values: dict[str, Any]) -> tuple[float, int, bool]:
    """(float, int, bool) of the expression's number; `values` also reads as the list of all inputs."""
    if not expression.strip():
        raise ValueError("Math Expression: the expression is empty")
    result = simple_eval(expression, names={**values, "values": list(values.values())}, functions=FUNCTIONS)
    if not isinstance(result, (int, float)):  # bool is an int: true and false count as 1 and 0
        raise ValueError(f"Math Expression {expression!r} gave {type(result).__name__} {result!r}, not a number")
    try:
        as_float = float(result)
    except OverflowError:
        raise ValueError(f"Math Expression {expression!r} gave a number too large for a float: {result}") from None
    if not math.isfinite(as_float):
        raise ValueError(f"Math Expression {expression!r} gave {result}, which is not finite")
    return as_float, int(result), bool(result)


class ComfyMathExpression:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_math"
    FUNCTION = "execute"
    CATEGORY = "utilities"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": DynamicSection(
                {"expression": ("STRING", {"default": "a + b", "multiline": True}), "values": VALUES}
            )
        }

    RETURN_TYPES = ("FLOAT", "INT", "BOOLEAN")
    RETURN_NAMES = ("FLOAT", "INT", "BOOL")
    OUTPUT_TOOLTIPS = (None, None, None)
    SEARCH_ALIASES = ["math", "expression", "formula", "calculate", "calculator", "eval"]
    DESCRIPTION = (
        "Computes a formula of the linked values a, b, c, ... (`values` is all of them as a list) with "
        "+ - * / // % **, comparisons and sum, min, max, abs, round, pow, sqrt, ceil, floor, log, "
        "log2, log10, sin, cos, tan, int, float; gives the result as a float, an int (truncated) and "
        "a boolean (not zero)."
    )

    def execute(self, expression: str, **kwargs: Any):
        return evaluate(expression, group(kwargs, "values", VALUES))


def to_number(value: Any) -> tuple[float, int]:
    """(float, int) of an int, float, boolean or numeric text; the int of a float is truncated."""
    if isinstance(value, bool):
        as_float, as_int = float(value), int(value)
    elif isinstance(value, int):
        as_float, as_int = float(value), value
    elif isinstance(value, float):
        as_float, as_int = value, int(value) if math.isfinite(value) else 0
    elif isinstance(value, str):
        text = value.strip()
        if not text:
            raise ValueError("Number Convert: the text is empty")
        try:
            as_float = float(text)
        except ValueError:
            raise ValueError(f"Number Convert: {value!r} is not a number") from None
        try:
            as_int = int(text)  # exact for long integers a float would round
        except ValueError:
            as_int = int(as_float) if math.isfinite(as_float) else 0
    else:
        raise TypeError(f"Number Convert takes INT, FLOAT, STRING or BOOLEAN, not {type(value).__name__}")
    if not math.isfinite(as_float):
        raise ValueError(f"Number Convert: {value!r} is not a finite number")
    return as_float, as_int


class ComfyNumberConvert:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_number_convert"
    FUNCTION = "execute"
    CATEGORY = "math"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("INT,FLOAT,STRING,BOOLEAN", {"display_name": "value"})}}

    RETURN_TYPES = ("FLOAT", "INT")
    RETURN_NAMES = ("FLOAT", "INT")
    OUTPUT_TOOLTIPS = (None, None)
    SEARCH_ALIASES = [
        "int to float",
        "float to int",
        "number convert",
        "int2float",
        "float2int",
        "cast",
        "parse number",
        "string to number",
        "bool to int",
    ]
    DESCRIPTION = "Turns an int, float, boolean or numeric text into a float and an int (truncated)."

    def execute(self, value: Any):
        return to_number(value)


NODE_CLASS_MAPPINGS = {"ComfyMathExpression": ComfyMathExpression, "ComfyNumberConvert": ComfyNumberConvert}
NODE_DISPLAY_NAME_MAPPINGS = {"ComfyMathExpression": "Math Expression", "ComfyNumberConvert": "Number Convert"}
