"""Fairness with video: tenant `video` queues long Wan 2.2 image-to-video prompts and tenant `image` queues SD1
text-to-image prompts on the same executors (a head with real executor processes, the tiny demo models). Each
scheduler event (dispatch, charge revision, completion) is recorded with both tenants' vTime and whether each is
backlogged (has ready invocations), so the run can be checked against the vTime bound of docs/scheduler.md:

    python scripts/video_fairness.py   # writes docs/benchmarks/video_fairness.json and .png

Service is the scheduler's own unit, vTime (the executor seconds charged: the estimate at dispatch, corrected
to the measured thread CPU time at completion); executor seconds of finished invocations are recorded beside
it. The bound (ServerlessT2I §6, with L_max the largest charge of one dispatch and Δ the slack): while a
tenant is backlogged no other tenant's vTime runs more than U = Δ + L_max ahead of it (here plus the drift of
charges corrected after their dispatch, see `summarise`), so over a window whose ends both find both tenants
backlogged each one's service is at least the other's minus 2U."""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TENANTS = ("video", "image")
OUT = REPO / "docs" / "benchmarks" / "video_fairness"


@dataclass(frozen=True)
class Load:
    """What each tenant queues: `videos` Wan image-to-video prompts (`frames` frames of `size` pixels square,
    `video_steps` steps) `video_streams` at a time, and `images` SD1 prompts (`image_size` pixels square,
    `image_steps` steps) `image_streams` at a time; first `warm_rounds` rounds of the same mix as another tenant.
    A video's VAE encode and decode over all its frames are its long invocations (over a second each on a CPU
    executor, ten image denoising steps or more)."""

    videos: int = 4
    video_streams: int = 4
    frames: int = 33
    size: int = 96
    video_steps: int = 8
    images: int = 12
    image_streams: int = 3
    image_size: int = 256
    image_steps: int = 4
    warm_rounds: int = 2


def video_prompt(load: Load, seed: int, tag: str = "") -> dict:
    prompt = json.loads((REPO / "workflows_json" / "wan22_i2v.json").read_text())
    prompt["161"]["inputs"]["value"] = (load.frames - 1) / prompt["162"]["inputs"]["value"]  # seconds at 16 fps
    prompt["128"]["inputs"]["value"] = load.video_steps
    prompt["127"]["inputs"]["value"] = load.video_steps // 2  # where the low-noise expert takes over
    prompt["86"]["inputs"]["noise_seed"] = seed
    prompt["98"]["inputs"].update(width=load.size, height=load.size)
    # a name of its own: outside the server's queue no claim book keeps concurrent prompts' names apart
    prompt["108"]["inputs"]["filename_prefix"] = f"video/fairness{tag}_{seed}"
    return prompt


def image_prompt(load: Load, seed: int, tag: str = "") -> dict:
    prompt = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
    prompt["3"]["inputs"].update(steps=load.image_steps, seed=seed)
    prompt["5"]["inputs"].update(width=load.image_size, height=load.image_size)
    prompt["9"]["inputs"]["filename_prefix"] = f"fairness{tag}_{seed}"
    return prompt


@dataclass
class Recorder:
    """Snapshots of the scheduler's accounting after each event, taken in the thread that made it: the event's
    tenant, how much its vTime changed (`change`: a dispatch's charge, a revision's or a completion's
    correction), the charge the invocation now carries, both tenants' vTime and whether each is backlogged."""

    scheduler: Any
    events: list[dict] = field(default_factory=list)
    measured: dict[str, float] = field(default_factory=lambda: dict.fromkeys(TENANTS, 0.0))
    lock: threading.RLock = field(default_factory=threading.RLock)

    def snapshot(self, kind: str, inv: Any, change: float) -> None:
        accounts = self.scheduler.tenants
        weight = accounts[inv.tenant].weight
        self.events.append(
            {
                "kind": kind,
                "tenant": inv.tenant,
                "invocation": inv.id,
                "change": change / weight,
                "charge": inv.charged / weight,
                "vtime": {t: accounts[t].vtime if t in accounts else 0.0 for t in TENANTS},
                "backlogged": {t: t in accounts and accounts[t].queued > 0 for t in TENANTS},
                "measured": dict(self.measured),
                "t": time.monotonic(),  # for the figure's time axis only
            }
        )


def instrument(scheduler: Any) -> Recorder:
    """Wrap the scheduler instance's event methods (dispatch: `pop`, `take`; `revise_charge`; `complete`) so
    that each records a snapshot of the two tenants' accounting after it ran."""
    rec = Recorder(scheduler)
    pop, take, revise, complete = scheduler.pop, scheduler.take, scheduler.revise_charge, scheduler.complete

    def popped() -> Any:
        with rec.lock:
            inv = pop()
            if inv is not None and inv.tenant in TENANTS:
                rec.snapshot("dispatch", inv, inv.charged)
            return inv

    def taken(inv: Any) -> None:
        with rec.lock:
            take(inv)
            if inv.tenant in TENANTS:
                rec.snapshot("dispatch", inv, inv.charged)

    def revised(inv: Any, charge: float) -> None:
        with rec.lock:
            before = inv.charged
            revise(inv, charge)
            if inv.tenant in TENANTS:
                rec.snapshot("revise", inv, inv.charged - before)

    def completed(inv: Any, measured: float | None) -> None:
        with rec.lock:
            before = inv.charged
            complete(inv, measured)
            if inv.tenant in TENANTS:
                rec.measured[inv.tenant] += measured or 0.0
                rec.snapshot("complete", inv, inv.charged - before)

    scheduler.pop, scheduler.take, scheduler.revise_charge, scheduler.complete = popped, taken, revised, completed
    return rec


def _run_stream(registry: Any, runtime: Any, prompts: list[dict], tenant: str, errors: list[str]) -> None:
    """Run the prompts one after the other as the tenant, on this thread's own event loop (as the server's
    queue worker threads do)."""
    from comfy_bridge.cli.run import ConsoleSink, load_prompt
    from comfy_bridge.execution import PromptExecutor
    from comfy_bridge.validation import validate_prompt

    async def run() -> None:
        for i, raw in enumerate(prompts):
            pid = f"{tenant}-{threading.get_ident()}-{i}"
            prompt, _ = load_prompt(raw, registry)
            valid, error, outputs, _ = await validate_prompt(registry, pid, prompt, None)
            if not valid:
                errors.append(f"{pid}: {error}")
                return
            executor = PromptExecutor(registry, ConsoleSink(False), runtime=runtime)
            await executor.execute_async(prompt, pid, {"tenant": tenant}, outputs)
            if not executor.success:
                errors.append(f"{pid}: {executor.history_result.get('status')}")

    asyncio.run(run())


def measure(ws: Any, load: Load = Load(), executors: int = 2, policy: str = "vtime", delta: float = 0.0) -> dict:
    """Run the two tenants' prompts at once on a fresh head with `executors` executor processes and return the
    recorded events, the bound's terms and the window shares (see `windows`)."""
    from cluster.executor.local_cluster import start_local_cluster
    from comfy_bridge.registry import build_registry

    registry = build_registry(ws)
    tag = uuid.uuid4().hex[:8]
    head, runtime = start_local_cluster(executors, threads_per_executor=1, policy=policy, delta=delta)
    try:
        errors: list[str] = []
        # the same mix first, as another tenant: every model loaded on every executor, the cost model's
        # estimates measured (its moving average starts at the first, slowest, run)
        warm = [([video_prompt(load, 1 + i, tag)], "warm-up") for i in range(load.video_streams)]
        warm += [([image_prompt(load, 11 + i, tag)], "warm-up") for i in range(load.image_streams)]
        for _ in range(load.warm_rounds):
            _threads(registry, runtime, warm, errors)
        rec = instrument(head.scheduler)
        streams = [
            ([video_prompt(load, 100 + i, tag) for i in range(s, load.videos, load.video_streams)], "video")
            for s in range(load.video_streams)
        ] + [
            ([image_prompt(load, 200 + i, tag) for i in range(s, load.images, load.image_streams)], "image")
            for s in range(load.image_streams)
        ]
        _threads(registry, runtime, streams, errors)
    finally:
        head.stop()
    if errors:
        raise RuntimeError("prompts failed: " + "; ".join(errors))
    return summarise(rec.events, delta, {"load": vars(load), "executors": executors, "policy": policy})


def _threads(registry: Any, runtime: Any, streams: list[tuple[list[dict], str]], errors: list[str]) -> None:
    threads = [
        threading.Thread(target=_run_stream, args=(registry, runtime, prompts, tenant, errors))
        for prompts, tenant in streams
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def summarise(events: list[dict], delta: float, setup: dict) -> dict:
    """The bound's terms and how the run kept to them.

    `l_max`: the largest charge of one dispatch (as charged at dispatch, or as revised or corrected since), and
    U = Δ + l_max. Layer 1 dispatches a tenant only when its vTime is within Δ of every backlogged tenant's, so
    right after tenant X's dispatch, X leads a backlogged Y by at most Δ + its charge <= U. Until X's next
    dispatch, X's lead over Y can only grow by corrections: X's invocations measured above their charge, Y's
    below. `bound` at each event is therefore U plus that drift (0 with exact estimates: the paper's bound), and
    `checks` counts the events where it applies (Y backlogged, and Y was backlogged at X's last dispatch too),
    `violations` those that broke it. `windows`: stretches between events that find both tenants backlogged,
    each at least 4 U of service long, with each tenant's service and the image tenant's share; since its
    service trails the video tenant's by at most the bounds at the two ends, share >= `least_share_image`."""
    l_max = max(e["charge"] for e in events)
    u = delta + l_max
    drift = dict.fromkeys(TENANTS, 0.0)  # growth of each tenant's lead since its last dispatch
    admitted = dict.fromkeys(TENANTS, False)  # was the other tenant backlogged at that dispatch?
    last = dict.fromkeys(TENANTS, None)  # the invocation of each tenant's last dispatch
    lead_max = dict.fromkeys(TENANTS, 0.0)
    checks, violations = 0, []
    bounds = []  # per event: the bound on each tenant's lead (None where it does not apply)
    for i, e in enumerate(events):
        x = e["tenant"]
        (y,) = [t for t in TENANTS if t != x]
        if e["kind"] == "dispatch":
            drift[x], admitted[x], last[x] = 0.0, e["backlogged"][y], e["invocation"]
        elif e["kind"] == "complete" or e["invocation"] != last[x]:
            # a revision of the invocation just dispatched is part of its charge (its placement: a cold start's
            # load); any other change of a charge after its dispatch is drift
            if e["change"] > 0:
                drift[x] += e["change"]  # x's own invocation ran longer than charged: x's lead grows
            else:
                drift[y] -= e["change"]  # x's ran shorter: x's vTime drops, y's lead over x grows
        bound = {}
        for lead, lag in (TENANTS, TENANTS[::-1]):
            if e["backlogged"][lag] and admitted[lead]:
                gap = e["vtime"][lead] - e["vtime"][lag]
                bound[lead] = u + drift[lead]
                lead_max[lead] = max(lead_max[lead], gap)
                checks += 1
                if gap > bound[lead] + 1e-9:
                    violations.append({"event": i, "lead": lead, "gap": gap, "bound": bound[lead]})
        bounds.append(bound)
    both = [i for i, b in enumerate(bounds) if len(b) == len(TENANTS)]  # both backlogged, both bounds apply
    windows = []
    start = both[0] if both else None
    for i in both[1:]:
        service = {t: events[i]["vtime"][t] - events[start]["vtime"][t] for t in TENANTS}
        total = sum(service.values())
        if total >= 4 * u:
            # image's service minus video's = -(video's lead at the end) - (image's lead at the start)
            slack = bounds[i]["video"] + bounds[start]["image"]
            windows.append(
                {
                    "events": [start, i],
                    "service": service,
                    "share_image": service["image"] / total,
                    "least_share_image": (total - slack) / (2 * total),
                }
            )
            start = i
    return {
        "setup": setup,
        "delta": delta,
        "l_max": l_max,
        "u": u,
        "largest_lead": lead_max,
        "largest_drift": max((b.get(t, u) - u for b in bounds for t in TENANTS), default=0.0),
        "checks": checks,
        "violations": violations,
        "windows": windows,
        "dispatches": {t: sum(e["kind"] == "dispatch" and e["tenant"] == t for e in events) for t in TENANTS},
        # each tenant's invocations as finally charged (their measured times): the longest, and the median
        "charges": {
            t: _spread([e["charge"] for e in events if e["kind"] == "complete" and e["tenant"] == t]) for t in TENANTS
        },
        "measured_s": events[-1]["measured"],
        "series": [{k: e[k] for k in ("t", "tenant", "kind", "vtime", "backlogged", "measured")} for e in events],
        "bounds": bounds,
    }


def _spread(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"max": ordered[-1], "median": ordered[len(ordered) // 2]} if ordered else {"max": 0.0, "median": 0.0}


def plot(path: Path, runs: list[dict]) -> None:
    """Per run (a policy): both tenants' service over time, and the video tenant's lead over the image tenant
    (dots where the bound applies) with the vTime run's U (dotted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for r, style in zip(runs, ("-", "--")):
        series = r["series"]
        t0, v0 = series[0]["t"], series[0]["vtime"]
        t = [e["t"] - t0 for e in series]
        for tenant in TENANTS:
            w = [e["vtime"][tenant] - v0[tenant] for e in series]
            axes[0].plot(t, w, style, label=f"{tenant} ({r['setup']['policy']})")
        lead = [e["vtime"]["video"] - e["vtime"]["image"] for e in series]
        (line,) = axes[1].plot(t, lead, style, linewidth=0.8, alpha=0.4)
        # where the bound applies (the image tenant backlogged now and at the video tenant's last dispatch): dots
        at = [(x, y) for x, y, b in zip(t, lead, r["bounds"]) if "video" in b]
        axes[1].plot(*zip(*at), ".", markersize=2.5, color=line.get_color(), label=r["setup"]["policy"])
        if r["setup"]["policy"] == "vtime":
            axes[1].axhline(r["u"], color=line.get_color(), linestyle=":", linewidth=0.8)
            axes[1].axhline(-r["u"], color=line.get_color(), linestyle=":", linewidth=0.8)
    axes[0].set_ylabel("service: vTime (executor-s)")
    axes[0].set_title("Service of each tenant", fontsize=10)
    axes[1].set_ylabel("video's vTime - image's (s)")
    axes[1].set_title("Video's lead (dots: bound applies); dotted: ±U, U = Δ + L_max", fontsize=9)
    for ax in axes:
        ax.set_xlabel("time (s)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    from comfy_bridge.cli.demo_models import ensure_demo_models
    from nodes.workspace import Workspace, activate

    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="video_fairness_"))
    ws = activate(Workspace(root).create())
    ensure_demo_models(ws)
    runs = [measure(ws, Load(), policy=p) for p in ("vtime", "fifo")]
    plot(OUT.with_suffix(".png"), runs)
    brief = [{k: v for k, v in r.items() if k not in ("series", "bounds", "violations")} for r in runs]
    for r, full in zip(brief, runs):
        r["violations"], r["first_violations"] = len(full["violations"]), full["violations"][:3]
    OUT.with_suffix(".json").write_text(json.dumps(brief, indent=1) + "\n")
    for r in brief:
        shares = ", ".join(f"{w['share_image']:.2f} (>= {w['least_share_image']:.2f})" for w in r["windows"])
        print(
            f"{r['setup']['policy']}: U = {r['u']:.2f} s, largest video lead {r['largest_lead']['video']:.2f} s, "
            f"{r['violations']} of {r['checks']} checks over the bound; image share per window: {shares}"
        )


if __name__ == "__main__":
    main()
