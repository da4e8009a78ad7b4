"""`comfy-cluster bench tenants-load`: a hosted server on loopback with N tenants x M queued prompts;
POST /prompt latency while every tenant queues its prompts at once with a key the server has not
seen yet (its first check runs scrypt), then GET /queue and GET /history latency (p50/p95/p99/max)
measured from every tenant while the worker executes the backlog, and how many prompts finished while
they polled. Targets: POST /prompt p99 under 250 ms, GET /queue and GET /history p99 under 50 ms.
`--duration S` polls for S seconds whatever is left (with `--poll 0` every client polls as fast as it can):
the number finished then says whether polling starves execution.

The server runs in its own process (as in production: its event loop shares the GIL with the
worker thread, not with the load generator) on the core nodes; each prompt is EmptyImage ->
SaveImage with a distinct colour, so no prompt is a cache hit and each one writes a PNG.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from comfy_bridge.bench import free_port

REPO = Path(__file__).resolve().parents[2]
# p99 targets in ms, per timed request kind
TARGETS_P99_MS = {"submit": 250.0, "queue": 50.0, "history": 50.0}


def _serve(workspace: str, state_db: str, port: int) -> int:
    """The server process: the hosted server on the core nodes (no custom nodes, no demo models)."""
    import logging

    from comfy_bridge.registry import build_registry
    from comfy_bridge.server import ServerConfig, run_server
    from nodes.workspace import Workspace

    logging.basicConfig(level=logging.WARNING)
    ws = Workspace(Path(workspace)).create()
    web = ws.root / "web"
    web.mkdir(exist_ok=True)
    (web / "index.html").write_text("<html></html>")
    config = ServerConfig(workspace=ws, state_db=state_db, port=port, front_end_root=web, dont_print_server=True)
    run_server(config, registry=build_registry(ws, load_custom_nodes=False))
    return 0


def _prompt(tenant: int, i: int, size: int) -> dict:
    return {
        "1": {
            "class_type": "EmptyImage",
            "inputs": {
                "width": size,
                "height": size,
                "batch_size": 1,
                "color": (tenant * 7919 + i * 104729) % 0xFFFFFF,
            },
        },
        "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0], "filename_prefix": f"load{i}"}},
    }


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50/p95/p99/max in ms (nearest rank)."""
    if not samples:
        return {"n": 0, "p50": float("nan"), "p95": float("nan"), "p99": float("nan"), "max": float("nan")}
    ordered = sorted(samples)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.999999) - 1))] * 1000

    return {"n": len(ordered), "p50": rank(0.50), "p95": rank(0.95), "p99": rank(0.99), "max": ordered[-1] * 1000}


async def _load(
    base: str,
    keys: list[str],
    prompts: int,
    size: int,
    poll_s: float,
    timeout_s: float,
    finished_count: Callable[[], int],
    duration_s: float | None = None,
) -> dict:
    """`finished_count()`: how many prompts are in the server's history (read from its store, not through
    the server the clients are loading)."""
    import aiohttp

    timings: dict[str, list[float]] = {"submit": [], "queue": [], "history": []}
    errors: list[str] = []
    async with aiohttp.ClientSession(base_url=base) as http:

        async def call(kind: str, method: str, path: str, key: str, **kw) -> dict | None:
            start = time.perf_counter()
            async with http.request(method, path, headers=_auth(key), **kw) as resp:
                body = await resp.read()
                elapsed = time.perf_counter() - start
            if resp.status != 200:
                errors.append(f"{method} {path}: {resp.status} {body[:200]!r}")
                return None
            timings[kind].append(elapsed)
            return json.loads(body)

        # No warm-up request: each tenant's first POST /prompt is the server's first check of its key
        # (scrypt), as for a client that starts queueing as soon as it has a key.
        # as the web UI queues: the prompt with its UI workflow (the demo's, 5 KB) in extra_pnginfo, which
        # /queue and /history then carry for every item
        workflow = json.loads((REPO / "workflows_json" / "text_to_image.ui.json").read_text())

        async def submit(t: int, key: str) -> None:
            for i in range(prompts):
                await call(
                    "submit",
                    "POST",
                    "/prompt",
                    key,
                    json={"prompt": _prompt(t, i, size), "extra_data": {"extra_pnginfo": {"workflow": workflow}}},
                )

        started = time.perf_counter()
        await asyncio.gather(*(submit(t, k) for t, k in enumerate(keys)))
        submitted = time.perf_counter() - started
        work_start = time.perf_counter()
        finished = {"n": 0}
        before = finished_count()

        async def poll(key: str) -> None:
            while time.perf_counter() - work_start < (timeout_s if duration_s is None else duration_s):
                queue = await call("queue", "GET", "/queue", key)
                history = await call("history", "GET", "/history", key)
                if (
                    queue is not None
                    and history is not None
                    and not queue["queue_running"]
                    and not queue["queue_pending"]
                    and len(history) >= prompts
                ):
                    finished["n"] += 1
                    if duration_s is None:
                        return
                # independent clients, not in lockstep
                await asyncio.sleep(poll_s * random.uniform(0.5, 1.5) if poll_s > 0 else 0)

        pollers = [asyncio.create_task(poll(k)) for k in keys]
        if duration_s is None:
            await asyncio.gather(*pollers)
        else:  # counted when the time is up, not when the slowest poll in flight returns
            await asyncio.sleep(duration_s)
        work = time.perf_counter() - work_start
        done = finished_count() - before
        for task in pollers:
            task.cancel()
        await asyncio.gather(*pollers, return_exceptions=True)
    return {
        "timings": timings,
        "errors": errors,
        "submitted_s": submitted,
        "work_s": work,
        "tenants": len(keys),
        "tenants_done": finished["n"] if duration_s is None else len(keys),
        "prompts_done": done,
        "finished_before": before,
        "polled_for": duration_s,
    }


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def run(
    tenants: int,
    prompts: int,
    size: int,
    poll_s: float,
    timeout_s: float,
    duration_s: float | None = None,
    single_user: bool = False,
) -> dict:
    """`single_user`: no tenant; `tenants` clients of the one user of the server (as `serve` with no
    tenant added), each queueing `prompts` and polling."""
    from comfy_bridge.tenancy.store import Store

    with tempfile.TemporaryDirectory(prefix="comfy-tenants-load-") as tmp:
        root = Path(tmp) / "ws"
        state_db = root / "state.sqlite3"
        store = Store(state_db)
        keys = []
        for t in range(tenants):
            if single_user:
                keys.append("")
                continue
            store.add_tenant(f"t{t:02d}")
            keys.append(store.create_key(f"t{t:02d}"))
        store.close()
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "comfy_bridge.bench.tenants_load", "--serve", str(root), str(state_db), str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_listening(port, server)
            result = asyncio.run(
                _load(base, keys, prompts, size, poll_s, timeout_s, lambda: _history_count(state_db), duration_s)
            )
            result["single_user"] = single_user
        finally:
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
    return result


def _history_count(state_db: Path) -> int:
    with contextlib.closing(sqlite3.connect(f"file:{state_db}?mode=ro", uri=True, timeout=30)) as db:
        return db.execute("SELECT COUNT(*) FROM history").fetchone()[0]


def _wait_listening(port: int, server: subprocess.Popen, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError("server exited:\n" + server.stderr.read().decode(errors="replace"))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("server did not start listening")


def report(result: dict, tenants: int, prompts: int, size: int) -> str:
    t = result["timings"]
    total = tenants * prompts
    done, work = result["prompts_done"], max(result["work_s"], 1e-9)
    polling = (
        f"{done} of {total} prompts finished during the {work:.1f} s of polling ({done / work:.1f} prompts/s)"
        if result.get("polled_for") is not None
        else f"{done} of {total} prompts finished during the polling ({done / work:.1f} prompts/s; the backlog "
        f"drained in {work:.1f} s), {result['tenants_done']}/{tenants} tenants saw all their history"
    )
    polling += f"; {result.get('finished_before', 0)} had finished while they were queued"
    who = f"{tenants} clients of one user" if result.get("single_user") else f"{tenants} tenants"
    lines = [
        f"tenants-load: {who} x {prompts} prompts = {total} queued on loopback "
        f"(EmptyImage {size}x{size} -> SaveImage, one worker)",
        f"queued in {result['submitted_s']:.1f} s, every tenant at once with a cold key; {polling}",
    ]
    for kind, label in (("submit", "POST /prompt"), ("queue", "GET /queue  "), ("history", "GET /history")):
        p = percentiles(t[kind])
        lines.append(
            f"  {label} n={p['n']:5d}  p50 {p['p50']:6.1f} ms  p95 {p['p95']:6.1f} ms  "
            f"p99 {p['p99']:6.1f} ms  max {p['max']:6.1f} ms  (target p99 < {TARGETS_P99_MS[kind]:.0f} ms)"
        )
    missed = verdict(result)
    lines.append("PASS" if not missed else "FAIL: " + "; ".join(missed))
    return "\n".join(lines)


def verdict(result: dict) -> list[str]:
    """What misses the targets (an empty list is a pass): a p99 over its target, a kind with no
    sample, any failed request, a tenant that never saw all its history."""
    missed = []
    for kind, target in TARGETS_P99_MS.items():
        p = percentiles(result["timings"][kind])
        if not p["n"]:
            missed.append(f"no {kind} request timed")
        elif not p["p99"] < target:
            missed.append(f"{kind} p99 {p['p99']:.1f} ms >= {target:.0f} ms")
    if result["errors"]:
        missed.append(f"{len(result['errors'])} failed requests, first: {result['errors'][0]}")
    if result["tenants_done"] < result["tenants"]:
        missed.append(f"{result['tenants'] - result['tenants_done']} tenants did not see all their history")
    return missed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="comfy-cluster bench tenants-load", description=__doc__.split("\n")[0])
    p.add_argument("--tenants", type=int, default=20)
    p.add_argument("--prompts", type=int, default=50, help="queued prompts per tenant")
    p.add_argument("--size", type=int, default=512, help="image side of each prompt (its work)")
    p.add_argument(
        "--poll",
        type=float,
        default=0.25,
        help="mean seconds between a tenant's /queue + /history polls (jittered; the web UI refreshes "
        "both on each status message)",
    )
    p.add_argument("--timeout", type=float, default=900.0)
    p.add_argument(
        "--single-user",
        action="store_true",
        help="no tenant: --tenants clients of the server's one user (serve with no tenant added)",
    )
    p.add_argument(
        "--duration",
        type=float,
        default=None,
        help="poll for this many seconds, finished or not, and count the prompts that finished meanwhile",
    )
    p.add_argument("--json", action="store_true", help="print the raw figures as JSON too")
    p.add_argument("--serve", nargs=3, metavar=("WORKSPACE", "STATE_DB", "PORT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        return _serve(args.serve[0], args.serve[1], int(args.serve[2]))
    from cluster.bench import results

    record = results.begin("tenants-load", argv)
    result = run(args.tenants, args.prompts, args.size, args.poll, args.timeout, args.duration, args.single_user)
    print(report(result, args.tenants, args.prompts, args.size))
    record.write(
        result["timings"],
        {k: percentiles(v) for k, v in result["timings"].items()},
        verdict=verdict(result),
        config=vars(args),
    )
    if args.json:
        print(json.dumps({k: percentiles(v) for k, v in result["timings"].items()}))
    return 1 if verdict(result) else 0


if __name__ == "__main__":
    sys.exit(main())
