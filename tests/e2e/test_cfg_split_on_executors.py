"""CFG split across executor processes (issue 41 item 3): with two idle executors a prompt's steps run as their two
guidance sides, one on each executor at once, then combined; the image is the unsplit in-process one, bit for bit
(one torch thread everywhere). Prompts go one at a time, so both executors are idle at every step."""

from __future__ import annotations

import json
import urllib.request

from tests.e2e.test_samplers_on_executors import differing_cases, render_in_process, render_on_server
from tests.nodes.test_cfg_split import prompt

STEPS = 3


def _executors(base: str) -> list[dict]:
    return json.loads(urllib.request.urlopen(base + "/cluster/stats", timeout=10).read())["executors"]


def test_split_steps_on_two_executors_give_the_in_process_image(serve, demo_workspace, fixed_threads):
    prompts = {s: prompt(s) for s in ("euler", "dpmpp_2m", "heun")}
    local = render_in_process(demo_workspace, prompts)
    base = serve("--executors", "2", "--executor-threads", "1")
    remote = {}
    for case, p in prompts.items():
        before = {e["id"]: e["completed"] for e in _executors(base)}
        remote.update(render_on_server(base, {case: p}))
        ran = {e["id"]: e["completed"] - before.get(e["id"], 0) for e in _executors(base)}
        # each step: a side on each executor and the combining step on one of them (+ text encodes, the decode)
        assert len(ran) == 2 and min(ran.values()) >= STEPS and sum(ran.values()) >= 3 * STEPS, (case, ran)
    assert not differing_cases(remote, local), differing_cases(remote, local)
