"""Checks of the model values that reach a node's inputs, with the errors users see when a link carries
something else (a pack's object, a value of the wrong component)."""

from __future__ import annotations

from typing import Any

from cluster.refs import ModelRef


def require_ref(value: Any, component: str, input_name: str, type_name: str) -> ModelRef:
    """`value` as a ModelRef of `component`, else a ValueError saying which input expected which type
    (`type_name`, as the node declares it) and what came instead."""
    if not isinstance(value, ModelRef) or value.component != component:
        article = "an" if type_name[0] in "AEIOU" else "a"
        raise ValueError(f"{input_name}: expected {article} {type_name}, got {type(value).__name__}")
    return value


def require_model(value: Any) -> ModelRef:
    """`value` as a MODEL (a diffusion model's ModelRef), else a ValueError naming what came instead."""
    return require_ref(value, "diffusion_model", "model", "MODEL")


def require_component(value: Any, component: str, input_name: str) -> ModelRef:
    """`value` as a ModelRef of `component` ("clip", "vae", ...), else ComfyUI's message for an invalid
    `input_name` input (what a checkpoint without that model gives)."""
    if not isinstance(value, ModelRef) or value.component != component:
        raise ValueError(
            f"ERROR: {input_name} input is invalid: {value!r}\n\nIf the {input_name} is from a "
            f"checkpoint loader node your checkpoint does not contain a valid {input_name} model."
        )
    return value
