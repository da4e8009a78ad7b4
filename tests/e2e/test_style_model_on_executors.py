"""CLIP vision encoding and the style model run as ModelFns on an executor: a styled prompt gives the
in-process image."""

from __future__ import annotations

from tests.e2e.test_samplers_on_executors import differing_cases, render_in_process, render_on_server
from tests.nodes.test_style_model import styled_prompt


def test_styled_prompt_on_one_executor_gives_the_in_process_image(serve, demo_workspace):
    prompts = {"multiply": styled_prompt(0.7, "multiply"), "attn_bias": styled_prompt(0.4, "attn_bias")}
    local = render_in_process(demo_workspace, prompts)
    base = serve("--executors", "1", "--executor-threads", "1")
    assert not differing_cases(render_on_server(base, prompts), local)
