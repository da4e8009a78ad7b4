"""Images per second under a mixed load, Comfy Cluster against a running ComfyUI, in one run.

    comfy-cluster bench throughput [--comfyui URL] [--serve-flags "FLAGS"]... [--mode mixed|single|both]
        [--prompts 12] [--tenants 3] [--rounds 3] [--size 128] [--steps 20] [--checkpoint demo|real|FILE]

Prepares one workspace per --serve-flags (default: one plain `serve`) with --tenants tenants and an admin
tenant that reads /cluster/stats. Each round, every contender in turn (the order rotating round by round, so
each sees about the same machine): our servers are started and warmed up (--warmup prompts at once) for
their turn and stopped after it, so only one holds an SD1.5 in memory beside ComfyUI; then
- mixed: --prompts prompts (throughput_load: three workflows, two samplers, new seeds, tenants in turn)
  posted at once: makespan, images/s, per-prompt latency (post to `execution_success`), the batches the
  head dispatched;
- single: warm single prompts, --single-cases more prompts one after another.
After the rounds a reference server (--executors 1 --concurrent-prompts 1 --max-batch 1) runs every mixed
load's prompts one at a time, and each side's images are compared with its (decoded pixels; for ComfyUI
this says whether its pixels equal ours).
--comfyui URL adds a running ComfyUI as a side (it must list the checkpoint; the bench uploads its input
picture); ratios are ours / ComfyUI's of the same round. --checkpoint real builds (once, under --cache-dir)
the random-weight real-size SD1.5 of `bench coldstart`; FILE uses that checkpoint. The result file
(docs/benchmarks/throughput.json, or --out) is written after every round, with the load average.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cluster.bench import results
from comfy_bridge.bench import coldstart, free_port
from comfy_bridge.bench.throughput_load import Side, get_json, image_hashes, mixed_load, run_load, upload_input

REFERENCE_FLAGS = ("--executors", "1", "--concurrent-prompts", "1", "--max-batch", "1")
START_TIMEOUT_S = 300.0


@dataclass
class Ours:
    """One of our servers: its flags and workspace (prepared once: models, tenants and their keys); it is
    started for its turn in each round and stopped after it, so that one SD1.5 server holds memory at once."""

    name: str
    flags: list[str]
    root: Path
    keys: tuple[str, ...]
    admin: str

    @contextlib.contextmanager
    def up(self, size: int, warmup: list) -> Iterator[Side]:
        """The server started and warmed up (`warmup` posted at once), stopped on leaving."""
        port = free_port()
        side = Side(self.name, f"http://127.0.0.1:{port}", self.keys, self.admin)
        command = [sys.executable, "-m", "comfy_bridge.cli", "serve", "--workspace", str(self.root), "--port"]
        env = {**os.environ, "PYTHONPATH": str(coldstart.REPO)}
        with open(self.root / "serve.log", "a") as log:
            process = subprocess.Popen(
                [*command, str(port), "--state-db", str(self.root / "state.sqlite3"), *self.flags],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            _wait_answering(side, process, self.root / "serve.log")
            upload_input(side, size)
            run_load(side, warmup)
            yield side
        finally:
            process.send_signal(2)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_answering(side: Side, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            get_json(side, "/system_stats")
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{side.name} did not start; see {log}") from None
            time.sleep(0.2)


class Running:
    """A ComfyUI the user started: always up, warmed up once."""

    def __init__(self, side: Side, size: int, warmup: list):
        upload_input(side, size)
        run_load(side, warmup)
        self.name = side.name
        self.side = side

    @contextlib.contextmanager
    def up(self, size: int, warmup: list) -> Iterator[Side]:
        yield self.side


def checkpoint_models(choice: str, cache_dir: Path, tmp: Path) -> tuple[Path, str]:
    """A models folder holding the checkpoint `choice` names, and the checkpoint's name in it."""
    models = tmp / "models"
    if choice == "demo":
        subprocess.run(
            [sys.executable, "-m", "comfy_bridge.cli", "demo-models", "--workspace", str(tmp / "demo")],
            env={**os.environ, "PYTHONPATH": str(coldstart.REPO)},
            check=True,
            capture_output=True,
        )
        (tmp / "demo" / "models").rename(models)
        return models, "sd1-tiny.safetensors"
    path = coldstart.ensure_checkpoint(cache_dir)[0] if choice == "real" else Path(choice).resolve()
    if not path.is_file():
        raise SystemExit(f"--checkpoint {choice}: no such file")
    (models / "checkpoints").mkdir(parents=True)
    (models / "checkpoints" / path.name).symlink_to(path)
    return models, path.name


def prepare(name: str, flags: list[str], models: Path, tenants: int, root: Path) -> Ours:
    """A fresh workspace for `serve FLAGS` sharing `models`, with `tenants` tenants and an admin."""
    from comfy_bridge.tenancy.store import Store

    root.mkdir(parents=True)
    (root / "models").symlink_to(models)
    store = Store(root / "state.sqlite3")
    keys = []
    for t in range(tenants):
        store.add_tenant(f"tenant{t}")
        keys.append(store.create_key(f"tenant{t}"))
    store.add_tenant("bench-admin", admin=True)
    admin = store.create_key("bench-admin")
    store.close()
    return Ours(name, flags, root, tuple(keys), admin)


def comfyui_side(url: str, tenants: int, checkpoint: str) -> tuple[Side, str]:
    """The running ComfyUI at `url` as a side (no keys), and its version; it must list `checkpoint`."""
    side = Side("comfyui", url.rstrip("/"), ("",) * tenants)
    listed = get_json(side, "/object_info/CheckpointLoaderSimple")["CheckpointLoaderSimple"]
    names = listed["input"]["required"]["ckpt_name"][0]
    if checkpoint not in names:
        raise SystemExit(
            f"ComfyUI at {url} does not list the checkpoint {checkpoint} (it lists {names}): point its "
            "extra_model_paths.yaml at the folder that holds it"
        )
    return side, get_json(side, "/system_stats").get("system", {}).get("comfyui_version", "?")


def _batches(side: Side) -> int | None:
    if not side.admin_key:
        return None
    return get_json(side, "/cluster/stats").get("batches_dispatched")


def _rotated(items: list, k: int) -> list:
    k %= len(items)
    return items[k:] + items[:k]


def measure_load(side: Side, items: list) -> dict:
    """One mixed load on `side`: its times, images and the batches dispatched meanwhile."""
    before = _batches(side)
    load = run_load(side, items)
    after = _batches(side)
    return {
        "makespan_s": load.makespan_s,
        "images_per_s": len(items) / load.makespan_s,
        "latencies_s": load.latencies_s,
        "images": image_hashes(side, load),
        "batches_dispatched": None if before is None else after - before,
    }


def one_at_a_time(side: Side, items: list) -> list[dict]:
    """Each prompt alone on `side`, in turn: its latency and images."""
    out = []
    for item in items:
        load = run_load(side, [item])
        out.append({"latency_s": load.latencies_s[0], "images": image_hashes(side, load)[0]})
    return out


def run_round(r: int, args: argparse.Namespace, contenders: list, checkpoint: str, warmup: list) -> tuple[dict, list]:
    """Round `r`: each contender in turn (the order rotating round by round) up, its mixed load, then its
    warm single prompts; the round's figures and its mixed load's prompts."""
    out: dict = {"round": r + 1, "load_start": [round(x, 2) for x in os.getloadavg()], "mixed": {}, "single": {}}
    items = mixed_load(args.prompts, args.tenants, 1000 * (r + 1), checkpoint, args.size, args.steps)
    cases = mixed_load(args.single_cases, args.tenants, 500_000 + 1000 * (r + 1), checkpoint, args.size, args.steps)
    for contender in _rotated(contenders, r):
        with contender.up(args.size, warmup) as side:
            if args.mode in ("mixed", "both"):
                out["mixed"][side.name] = measure_load(side, items)
            if args.mode in ("single", "both"):
                out["single"][side.name] = one_at_a_time(side, cases)
    out["load_end"] = [round(x, 2) for x in os.getloadavg()]
    return {k: v for k, v in out.items() if v}, items


def compare_to_reference(
    rounds: list[dict], loads: list[list], reference: Ours, args: argparse.Namespace, warmup: list
) -> None:
    """Every mixed load's prompts one at a time on the reference server; marks, per side and prompt, whether
    its images equal the reference's (for ComfyUI: whether ComfyUI's pixels equal ours)."""
    with reference.up(args.size, warmup) as side:
        for r, items in zip(rounds, loads, strict=True):
            ref = [o["images"] for o in one_at_a_time(side, items)]
            for m in r["mixed"].values():
                m["identical_to_reference"] = [a == b for a, b in zip(m["images"], ref, strict=True)]


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.999999) - 1))]


def figure(rounds: list[dict], ours: list[str], comfyui: str | None) -> dict:
    """Per side: median makespan, images/s, latency percentiles over every round, identical images, and
    (with ComfyUI) the median of the rounds' ratios ours / ComfyUI and the ratio of the minima."""
    out: dict = {}
    for name in ours + ([comfyui] if comfyui else []):
        side: dict = {}
        mixed = [r["mixed"][name] for r in rounds if "mixed" in r]
        if mixed:
            spans = [m["makespan_s"] for m in mixed]
            lat = [x for m in mixed for x in m["latencies_s"]]
            side["mixed"] = {
                "makespan_median_s": statistics.median(spans),
                "makespan_min_s": min(spans),
                "images_per_s_median": statistics.median(m["images_per_s"] for m in mixed),
                **{f"latency_p{q}_s": percentile(lat, q / 100) for q in (50, 90, 99)},
            }
            same = [x for m in mixed for x in m.get("identical_to_reference", [])]
            if same:  # ComfyUI's images against our reference: whether its pixels equal ours
                key = "pixels_equal_to_ours" if name == comfyui else "identical_to_reference"
                side["mixed"][key] = f"{sum(same)}/{len(same)}"
            if comfyui and name != comfyui:
                ratios = [r["mixed"][name]["makespan_s"] / r["mixed"][comfyui]["makespan_s"] for r in rounds]
                side["mixed"]["makespan_ratio_median"] = statistics.median(ratios)
                side["mixed"]["makespan_ratio_of_minima"] = min(spans) / min(
                    r["mixed"][comfyui]["makespan_s"] for r in rounds
                )
        singles = [r["single"][name] for r in rounds if "single" in r]
        if singles:
            totals = [sum(c["latency_s"] for c in s) for s in singles]
            side["single"] = {"round_total_median_s": statistics.median(totals), "cases": len(singles[0])}
            if comfyui and name != comfyui:
                theirs = [sum(c["latency_s"] for c in r["single"][comfyui]) for r in rounds]
                side["single"]["ratio_median"] = statistics.median(a / b for a, b in zip(totals, theirs, strict=True))
        out[name] = side
    return out


def report(fig: dict, rounds: list[dict]) -> list[str]:
    lines = []
    for r in rounds:
        load = f"round {r['round']} (load average {r['load_start'][0]} -> {r['load_end'][0]}):"
        parts = []
        for name, m in r.get("mixed", {}).items():
            same = m.get("identical_to_reference")
            parts.append(
                f"  mixed {name}: makespan {m['makespan_s']:.2f} s, {m['images_per_s']:.2f} images/s"
                + (f", batches {m['batches_dispatched']}" if m["batches_dispatched"] is not None else "")
                + (f", {sum(same)}/{len(same)} images equal one-at-a-time" if same is not None else "")
            )
        for name, cases in r.get("single", {}).items():
            parts.append(f"  single {name}: " + ", ".join(f"{c['latency_s']:.2f}" for c in cases) + " s")
        lines += [load, *parts]
    for name, side in fig.items():
        for mode, values in side.items():
            lines.append(f"{name} [{mode}]: " + ", ".join(f"{k} {_fmt(v)}" for k, v in values.items()))
    return lines


def _fmt(v: object) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def side_names(serve_flags: list[str]) -> list[str]:
    """A distinct name per --serve-flags: `serve FLAGS`."""
    names: list[str] = []
    for flags in serve_flags:
        name = " ".join(["serve", *shlex.split(flags)])
        names.append(name if name not in names else f"{name} #{names.count(name) + 1}")
    return names


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="comfy-cluster bench throughput", description=__doc__.split("\n")[0])
    p.add_argument("--comfyui", metavar="URL", help="a running ComfyUI to load with the same prompts")
    p.add_argument(
        "--serve-flags",
        action="append",
        metavar="FLAGS",
        help='flags of one `serve` to measure, quoted ("--executors 2"); repeat to compare (default: none)',
    )
    p.add_argument("--mode", choices=("mixed", "single", "both"), default="both")
    p.add_argument("--prompts", type=int, default=12, help="prompts of each mixed load, posted at once")
    p.add_argument("--tenants", type=int, default=3)
    p.add_argument("--single-cases", type=int, default=6, help="warm single prompts per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=6, help="prompts posted at once to each side before round 1")
    p.add_argument("--size", type=int, default=128, help="image side (the wide workflow is 1.5x as wide)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--checkpoint", default="demo", help="demo (sd1-tiny), real (real-size SD1.5), or a file")
    p.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "comfy-cluster" / "bench"))
    p.add_argument("--no-reference", action="store_true", help="skip the one-at-a-time reference server")
    p.add_argument("--label", default=None, help="a note stored in the result file (e.g. the machine's state)")
    p.add_argument("--out", type=Path, default=None, help="result file (default docs/benchmarks/throughput.json)")
    args = p.parse_args(argv)
    for name in ("prompts", "tenants", "rounds", "size", "steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    if args.size % 8:
        p.error("--size must be a multiple of 8 (the latent is an eighth of the image)")
    args.serve_flags = args.serve_flags or [""]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    record = results.begin("throughput", argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-throughput-"))
    try:
        models, checkpoint = checkpoint_models(args.checkpoint, Path(args.cache_dir), tmp)
        warmup = mixed_load(args.warmup, args.tenants, 900_000, checkpoint, args.size, args.steps)
        contenders: list = [
            prepare(name, shlex.split(flags), models, args.tenants, tmp / f"ws{i}")
            for i, (name, flags) in enumerate(zip(side_names(args.serve_flags), args.serve_flags, strict=True))
        ]
        ours = [c.name for c in contenders]
        version = None
        if args.comfyui:
            side, version = comfyui_side(args.comfyui, args.tenants, checkpoint)
            contenders.append(Running(side, args.size, warmup))
        comfyui = "comfyui" if args.comfyui else None
        config = {**vars(args), "out": str(args.out), "checkpoint_name": checkpoint, "comfyui_version": version}
        rounds: list[dict] = []
        loads: list[list] = []
        for r in range(args.rounds):
            figures, items = run_round(r, args, contenders, checkpoint, warmup)
            rounds.append(figures)
            loads.append(items)
            record.write(rounds, figure(rounds, ours, comfyui), out=args.out, config=config, label=args.label)
        if not args.no_reference and args.mode != "single":
            reference = prepare("reference", list(REFERENCE_FLAGS), models, args.tenants, tmp / "ref")
            compare_to_reference(rounds, loads, reference, args, warmup)
            record.write(rounds, figure(rounds, ours, comfyui), out=args.out, config=config, label=args.label)
        print("\n".join(report(figure(rounds, ours, comfyui), rounds)))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
