"""One image's latency with its CFG split across two executors, against one executor, in one run (issue 41).

    comfy-cluster bench cfg-split [--checkpoint demo|real|FILE] [--size 256] [--steps 8] [--prompts 3]

Two servers on the same checkpoint: `serve --executors 1 --executor-threads 1` (one executor of one thread) and
`serve --executors 2 --executor-threads 1` (two, where each step's guidance sides run one on each executor:
nodes.modelfns.cfg_split), both one prompt at a time and without batching. Each takes its turn four times, in the
order one, two, two, one (so both see about the same machine), started and warmed up for its turn and stopped
after it; a turn renders --prompts prompts one after another (the default text-to-image workflow, euler/normal,
new seeds per prompt, the same seeds in every turn), each timed from its post to its `execution_success`. The
figure: the median latency of the split against the one executor's, and whether every image is pixel-identical
between the two (it must be: the network is batch-invariant). Written to docs/benchmarks/cfg_split.json (or
--out) after every turn, with the load average.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path

from cluster.bench import results
from comfy_bridge.bench.throughput import checkpoint_models, prepare
from comfy_bridge.bench.throughput_load import image_hashes, prompt_for, run_load

ONE = ("--executors", "1", "--executor-threads", "1", "--concurrent-prompts", "1", "--max-batch", "1")
SPLIT = ("--executors", "2", "--executor-threads", "1", "--concurrent-prompts", "1", "--max-batch", "1")
ORDER = ("one executor", "cfg split", "cfg split", "one executor")


def turn(side, items: list) -> list[dict]:
    """Each prompt of `items` alone, one after another: its latency and its images' pixel hashes."""
    out = []
    for item in items:
        load = run_load(side, [item])
        out.append({"latency_s": load.latencies_s[0], "images": image_hashes(side, load)[0]})
    return out


def figure(turns: list[dict]) -> dict:
    """Median latency per server, the split's ratio to one executor, and whether the images agree."""
    latencies: dict[str, list[float]] = {}
    images: dict[str, list] = {}
    for t in turns:
        latencies.setdefault(t["server"], []).extend(p["latency_s"] for p in t["prompts"])
        images.setdefault(t["server"], []).append([p["images"] for p in t["prompts"]])
    medians = {name: statistics.median(v) for name, v in latencies.items()}
    out: dict = {"median_latency_s": {k: round(v, 3) for k, v in medians.items()}}
    if len(medians) == 2:
        out["ratio"] = round(medians["cfg split"] / medians["one executor"], 3)
        every = [run for runs in images.values() for run in runs]
        out["images_identical"] = all(run == every[0] for run in every)
    return out


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="comfy-cluster bench cfg-split", description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", default="real", help="demo (sd1-tiny), real (real-size SD1.5), or a file")
    p.add_argument("--size", type=int, default=256, help="image side")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--prompts", type=int, default=3, help="prompts per turn, one after another")
    p.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "comfy-cluster" / "bench"))
    p.add_argument("--label", default=None, help="a note stored in the result file (e.g. the machine's state)")
    p.add_argument("--out", type=Path, default=None, help="result file (default docs/benchmarks/cfg_split.json)")
    args = p.parse_args(argv)
    if args.size % 8 or args.size < 8:
        p.error("--size must be a positive multiple of 8 (the latent is an eighth of the image)")
    for name in ("steps", "prompts"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    record = results.begin("cfg_split", argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-cfg-split-"))
    try:
        models, checkpoint = checkpoint_models(args.checkpoint, Path(args.cache_dir), tmp)
        # prompt index 0 of the throughput load: the default text-to-image workflow with euler / normal
        items = [(0, prompt_for(0, 7000 + i, 0, checkpoint, args.size, args.steps)) for i in range(args.prompts)]
        warmup = [(0, prompt_for(0, 6999, 0, checkpoint, args.size, args.steps))]
        servers = {
            "one executor": prepare("one executor", list(ONE), models, 1, tmp / "one"),
            "cfg split": prepare("cfg split", list(SPLIT), models, 1, tmp / "split"),
        }
        config = {
            **vars(args),
            "out": str(args.out),
            "checkpoint_name": checkpoint,
            "flags": {"one": ONE, "split": SPLIT},
        }
        turns: list[dict] = []
        for name in ORDER:
            with servers[name].up(args.size, warmup) as side:
                turns.append({"server": name, "prompts": turn(side, items)})
            record.write(turns, figure(turns), out=args.out, config=config, label=args.label)
            print(f"{name}: {[round(p['latency_s'], 2) for p in turns[-1]['prompts']]} s")
        fig = figure(turns)
        print(
            f"median latency {fig['median_latency_s']}; split / one executor {fig.get('ratio')}; "
            f"images identical: {fig.get('images_identical')}"
        )
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
