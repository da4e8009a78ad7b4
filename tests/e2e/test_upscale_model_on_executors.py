"""ImageUpscaleWithModel runs as the `upscale_image` ModelFn on an executor and gives the in-process image."""

from __future__ import annotations

from tests.e2e.test_samplers_on_executors import differing_cases, render_in_process, render_on_server
from tests.nodes.test_upscale_model import UPSCALE_PROMPT


def test_upscale_on_one_executor_gives_the_in_process_image(serve, demo_workspace):
    prompts = {"upscale": UPSCALE_PROMPT}
    local = render_in_process(demo_workspace, prompts)
    base = serve("--executors", "1", "--executor-threads", "1")
    assert not differing_cases(render_on_server(base, prompts), local)
