"""SIGKILL the executor that is running a denoising step of a prompt: the head re-runs that step
elsewhere (its "reruns" counter moves), the prompt completes, and its image is bit-identical to the
undisturbed in-process run (one torch thread on both sides).

The victim is chosen from the head's own state: GET /cluster/stats lists each executor's pid and its
dispatches in flight (ModelFn, request = the prompt's id, dispatch id). To know that the step is still
running when the kill lands, and not already finished with its reply on the way, the executor is first
stopped (SIGSTOP) and held until the head has heard nothing from it for two heartbeats while still
listing that dispatch in flight: everything it sent before it stopped has been read by then, so the step
was not done. Then SIGKILL. If the dispatch completed in between, the executor is resumed and the next
step is tried. Every wait is on a condition of the stats or the history, never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[2]
SEED, STEPS = 4242, 20
HEARTBEAT_S, LOST_AFTER_S = 0.5, 3.0  # the head's defaults, which `serve` keeps


def _get(url: str) -> bytes:
    return urllib.request.urlopen(url, timeout=30).read()


def _prompt() -> dict:
    prompt = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
    prompt["3"]["inputs"].update(seed=SEED, steps=STEPS)
    return prompt


def _wait(what: str, check, timeout: float = 120.0, every: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every)


def test_executor_killed_while_running_a_denoise_step(serve, demo_workspace, fixed_threads):
    base = serve("--executors", "2", "--executor-threads", "1")

    def stats() -> dict:
        return json.loads(_get(base + "/cluster/stats"))

    def history() -> dict:
        return json.loads(_get(f"{base}/history/{prompt_id}")).get(prompt_id, {})

    t0 = time.monotonic()
    _wait("two executors", lambda: len(stats()["executors"]) == 2)
    t_ready = time.monotonic()
    body = json.dumps({"prompt": _prompt(), "client_id": uuid.uuid4().hex}).encode()
    prompt_id = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())[
        "prompt_id"
    ]

    def denoising() -> tuple[dict, dict] | None:
        """(executor, dispatch) of a denoise_step of this prompt in flight, per the head, on an executor
        that holds the UNet already (a step, not a step that first loads the weights)."""
        for ex in stats()["executors"]:
            for job in ex["inflight"]:
                if job["fn"] == "denoise_step" and job["request"] == prompt_id and job["model"] in ex["cached_models"]:
                    return ex, job
        assert not history(), "the prompt ended before a denoising step of it was caught on an executor"
        return None

    victim = dispatch = at_kill = None
    for _attempt in range(20):
        ex, job = _wait("a denoise_step of the prompt on an executor", denoising, every=0.01)
        os.kill(ex["pid"], signal.SIGSTOP)
        held = None
        while held is None:
            s = stats()
            now = next((e for e in s["executors"] if e["id"] == ex["id"]), None)
            if now is None or job["dispatch_id"] not in {j["dispatch_id"] for j in now["inflight"]}:
                held = False  # it finished that step before it stopped (or was lost meanwhile)
            elif now["last_seen_s"] >= 2 * HEARTBEAT_S:
                held = True
            else:
                time.sleep(0.02)
        if held and now["last_seen_s"] < LOST_AFTER_S - 0.5:
            victim, dispatch, at_kill = ex, job, s
            os.kill(ex["pid"], signal.SIGKILL)
            t_kill = time.monotonic()
            break
        os.kill(ex["pid"], signal.SIGCONT)
    assert victim is not None, "never caught an executor holding a denoise_step of the prompt"

    # The head loses that executor and runs the step again on another one.
    def rerun() -> dict | None:
        s = stats()
        if s["reruns"] > at_kill["reruns"]:
            return s
        h = history()
        assert not h, f"the prompt ended without a re-run: {h['status']}"
        return None

    after = _wait("the head to re-run the killed executor's denoise_step", rerun, timeout=60)
    assert after["executors_lost"] > at_kill["executors_lost"]
    assert victim["id"] not in {e["id"] for e in after["executors"]}

    done = _wait(
        "the prompt to finish",
        lambda: (h := history()) and (h["status"]["completed"] or h["status"]["status_str"] == "error") and h,
        timeout=600,
        every=0.2,
    )
    assert done["status"]["status_str"] == "success", done["status"]
    (out,) = [im for o in done["outputs"].values() for im in o.get("images", [])]
    image = np.asarray(Image.open(io.BytesIO(_get(f"{base}/view?" + urllib.parse.urlencode(out)))))
    t_done = time.monotonic()
    final = stats()
    assert final["failed"] == at_kill["failed"]
    print(
        f"killed executor {victim['id']} (pid {victim['pid']}) in step {dispatch}; reruns "
        f"{at_kill['reruns']} -> {final['reruns']}, executors lost {at_kill['executors_lost']} -> "
        f"{final['executors_lost']}; executors up {t_ready - t0:.1f}s, kill after {t_kill - t_ready:.1f}s, "
        f"done {t_done - t_kill:.1f}s later"
    )

    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    (path,) = asyncio.run(run_prompt(_prompt(), None, build_registry(demo_workspace), show_progress=False))
    assert np.array_equal(image, np.asarray(Image.open(path))), "the image differs after the kill"
