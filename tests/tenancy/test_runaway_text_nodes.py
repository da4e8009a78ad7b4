"""A model-free node that runs away hurts only its own prompt (issue 35, item 1).

Tenant A runs ComfyUI's regular-expression nodes on inputs that backtrack exponentially or blow a
text up; tenant B uses the server meanwhile. Python's `re` holds the GIL for a whole match, so in the
server's process such a node froze every request and no interrupt reached it: B's GET /queue stays
fast while A's match runs, A's interrupt stops the match within a second, and a text past the limit
fails A's prompt with an error that names the node and the limit.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import psutil
import pytest
import tenant_nodes as tn

from comfy_bridge.registry import NodeRegistry
from nodes.library.preview_any import PreviewAny
from nodes.library.string import RegexMatch, RegexReplace, StringConcatenate

# (a+)+$ on a run of a's that ends in another character tries every split of the run: 2**28 paths,
# about 20 s for `re` on a 2-core development machine, so it is still matching when the test acts.
RUNAWAY = "a" * 28 + "!"


@pytest.fixture
def text_nodes(monkeypatch):
    def registry() -> NodeRegistry:
        reg = NodeRegistry()
        reg.add_builtin(
            {
                **tn.CLASSES,
                "RegexMatch": RegexMatch,
                "RegexReplace": RegexReplace,
                "StringConcatenate": StringConcatenate,
                "PreviewAny": PreviewAny,
            }
        )
        return reg

    monkeypatch.setattr(tn, "registry", registry)


@pytest.fixture
async def hosted(text_nodes, hosted):
    """conftest's hosted server, with ComfyUI's text nodes beside the tenancy test nodes."""
    return hosted


def _shown(node: dict) -> dict:
    return {"1": node, "2": {"class_type": "PreviewAny", "inputs": {"source": ["1", 0]}}}


def _match(string: str, pattern: str) -> dict:
    return _shown(
        {
            "class_type": "RegexMatch",
            "inputs": {
                "string": string,
                "regex_pattern": pattern,
                "case_insensitive": True,
                "multiline": False,
                "dotall": False,
            },
        }
    )


def _runaway_match() -> dict:
    return _match(RUNAWAY, "(a+)+$")


async def _execution_error(hosted, name: str, prompt_id: str) -> dict:
    entry = await hosted.wait_history(name, prompt_id, timeout=60)
    assert entry["status"]["status_str"] == "error"
    return next(data for event, data in entry["status"]["messages"] if event == "execution_error")


async def _ok(hosted, name: str) -> None:
    """`name` still gets its work done: a prompt of its own runs to success."""
    pid = (await hosted.post_prompt(name, tn.prompt(7)))["prompt_id"]
    assert (await hosted.wait_history(name, pid, timeout=60))["status"]["status_str"] == "success"


def _regex_workers() -> list[psutil.Process]:
    return [p for p in psutil.Process().children() if any("regex_worker" in part for part in p.cmdline())]


async def test_runaway_regex_leaves_other_tenants_served_and_stops_on_interrupt(hosted):
    hosted.add("a")
    hosted.add("b")
    # A warm server: A's engine exists and a regex worker waits (the first prompt's start-up is not measured).
    pid = (await hosted.post_prompt("a", _match("x = 42", r"\d+")))["prompt_id"]
    assert (await hosted.wait_history("a", pid))["outputs"]["2"]["text"] == ["True"]
    # B sends a GET /queue every 110 ms (under the server's 10 reads/s pace per caller) from A's POST on (A's node starts within milliseconds).
    # A request's latency counts from when it was due, so a stalled event loop shows wherever the stall
    # falls (in a request, between two, or in A's POST), as a client in another process would see it.
    due, latencies = time.perf_counter(), []
    pid = (await hosted.post_prompt("a", _runaway_match()))["prompt_id"]
    for _ in range(25):
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        resp = await hosted.client.get("/queue", headers=hosted.auth("b"))
        assert resp.status == 200
        await resp.json()
        latencies.append(time.perf_counter() - due)
        due += 0.110
    p99 = statistics.quantiles(latencies, n=100, method="inclusive")[98]
    assert p99 < 0.050, f"B's GET /queue p99 {p99 * 1000:.1f} ms while A's regex runs (max {max(latencies):.3f} s)"

    # A's match was running all along (it takes far longer than the requests did), in a process of its own
    # that is busy matching ...
    assert pid not in await (await hosted.client.get(f"/history/{pid}", headers=hosted.auth("a"))).json()
    busy = [p for p in _regex_workers() if p.status() == psutil.STATUS_RUNNING]  # idle ones sleep on a pipe
    assert len(busy) == 1
    # ... and A's interrupt ends that process, not merely the prompt around it, within a second.
    started = time.perf_counter()
    assert (await hosted.client.post("/interrupt", json={}, headers=hosted.auth("a"))).status == 200
    entry = await hosted.wait_history("a", pid, timeout=60)
    elapsed = time.perf_counter() - started
    assert elapsed < 1.0, f"the interrupted regex node ended {elapsed:.2f} s after POST /interrupt"
    assert "execution_interrupted" in [event for event, _ in entry["status"]["messages"]]
    assert not busy[0].is_running()
    await _ok(hosted, "b")


async def test_runaway_regex_is_stopped_at_the_time_limit(hosted, monkeypatch):
    from nodes import regex_runner

    monkeypatch.setattr(regex_runner, "SECONDS", 0.5)
    hosted.add("a")
    hosted.add("b")
    started = time.perf_counter()
    pid = (await hosted.post_prompt("a", _runaway_match()))["prompt_id"]
    error = await _execution_error(hosted, "a", pid)
    assert time.perf_counter() - started < 5.0
    assert error["node_type"] == "RegexMatch"
    assert error["exception_type"] == "nodes.regex_runner.RegexStopped"
    assert "RegexMatch: the regular expression ran longer than 0.5 s and was stopped" in error["exception_message"]
    await _ok(hosted, "b")


async def test_regex_replace_blow_up_fails_its_prompt_only(hosted):
    hosted.add("a")
    hosted.add("b")
    # An empty pattern matches at each of the 20,001 positions: 50 characters each, a million in all.
    blow_up = _shown(
        {"class_type": "RegexReplace", "inputs": {"string": "x" * 20_000, "regex_pattern": "", "replace": "y" * 50}}
    )
    pid = (await hosted.post_prompt("a", blow_up))["prompt_id"]
    error = await _execution_error(hosted, "a", pid)
    assert error["node_type"] == "RegexReplace"
    assert error["exception_type"] == "nodes.text_limits.TextTooLong"
    assert error["exception_message"].startswith("RegexReplace: the result would be 100,0")
    assert "max_text_chars = 100,000" in error["exception_message"]
    await _ok(hosted, "b")
    await _ok(hosted, "a")


async def test_text_nodes_use_the_tenant_own_text_limit(hosted):
    hosted.add("small", max_text_chars=300)
    hosted.add("b")
    doubled = _shown(
        {"class_type": "StringConcatenate", "inputs": {"string_a": "z" * 200, "string_b": "z" * 200, "delimiter": ""}}
    )
    error = await _execution_error(hosted, "small", (await hosted.post_prompt("small", doubled))["prompt_id"])
    assert error["exception_message"].startswith(
        "StringConcatenate: the result would be 400 characters, more than the text limit max_text_chars = 300"
    )
    pid = (await hosted.post_prompt("b", doubled))["prompt_id"]  # within the server's limit
    entry = await hosted.wait_history("b", pid)
    assert entry["outputs"]["2"]["text"] == ["z" * 400]
