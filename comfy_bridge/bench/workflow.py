"""The default workflow on the cluster against in-process, in one run.

    comfy-cluster bench cluster [--size 128] [--repeats 5] [--executors 2] [--threads 1]

Both paths run the same engine on the same demo checkpoint (text_to_image.json: two text encodes,
20 Euler steps with CFG, VAE decode, PNG): in-process every ModelFn runs in this process with
`--threads` torch threads; on the cluster each runs in one of `--executors` executor processes with
`--threads` threads each, one invocation per denoising step, inputs and outputs moving through the
data plane. Reported: one prompt's latency (min of N, the two paths interleaved so machine noise
hits both) and the time for `--executors` prompts submitted at once, with the ratio, and whether
the images are bit-identical.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path


async def _run(registry, prompt: dict, runtime, n: int = 1) -> list[bytes]:
    """Run `n` copies of the prompt at once; returns the PNG bytes of each."""
    from comfy_bridge.cli.run import ConsoleSink
    from comfy_bridge.execution import PromptExecutor
    from comfy_bridge.validation import validate_prompt
    from nodes.workspace import active

    async def one(i: int) -> bytes:
        pid = f"bench-{i}-{time.monotonic_ns()}"
        valid, error, outputs, _ = await validate_prompt(registry, pid, prompt, None)
        assert valid, error
        ex = PromptExecutor(registry, ConsoleSink(False), runtime=runtime)
        await ex.execute_async(prompt, pid, {"tenant": f"bench{i}"}, outputs)
        assert ex.success, ex.status_messages
        [image] = [im for ui in ex.history_result["outputs"].values() for im in ui.get("images", [])]
        return (active().output_dir / image.get("subfolder", "") / image["filename"]).read_bytes()

    return list(await asyncio.gather(*(one(i) for i in range(n))))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="comfy-cluster bench cluster", description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--executors", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="torch threads in-process and per executor")
    args = p.parse_args(argv)
    from cluster.bench import results

    record = results.begin("cluster", argv)
    from cluster.local import LocalRuntime, set_threads

    set_threads(args.threads)  # this thread and the in-process ModelFn thread (OpenMP counts are per thread)
    from cluster.executor.local_cluster import start_local_cluster
    from comfy_bridge.bench.engine import sd1_prompt
    from comfy_bridge.cli.demo_models import ensure_demo_models
    from comfy_bridge.registry import build_registry
    from nodes.workspace import Workspace, activate

    with tempfile.TemporaryDirectory() as tmp:
        ws = activate(Workspace(Path(tmp)).create())
        ensure_demo_models(ws)
        registry = build_registry(ws)
        prompt = sd1_prompt(args.size)
        local = LocalRuntime()
        head, cluster = start_local_cluster(args.executors, args.threads)
        try:
            paths = {"in-process": local, "cluster": cluster}
            images = {name: asyncio.run(_run(registry, prompt, rt)) for name, rt in paths.items()}  # warm-up
            single = {name: [] for name in paths}
            batch = {name: [] for name in paths}
            for _ in range(args.repeats):
                for name, rt in paths.items():
                    t0 = time.perf_counter()
                    asyncio.run(_run(registry, prompt, rt))
                    single[name].append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    asyncio.run(_run(registry, prompt, rt, args.executors))
                    batch[name].append(time.perf_counter() - t0)
        finally:
            head.stop()
    same = images["in-process"] == images["cluster"]
    a, b = min(single["cluster"]), min(single["in-process"])
    c, d = min(batch["cluster"]), min(batch["in-process"])
    print(
        f"default workflow at {args.size} px (sd1-tiny, 20 steps euler, cfg 8), {args.threads} torch thread(s) "
        f"per process, min of {args.repeats}; images bit-identical: {same}"
    )
    print(f"one prompt: cluster ({args.executors} executors) {a:.3f} s, in-process {b:.3f} s, ratio {a / b:.2f}")
    print(f"{args.executors} prompts at once: cluster {c:.3f} s, in-process {d:.3f} s, ratio {c / d:.2f}")
    record.write(
        {"one_prompt_s": single, "prompts_at_once_s": batch},
        {
            "one_prompt": {"cluster_s": a, "in_process_s": b, "ratio": a / b},
            "at_once": {"cluster_s": c, "in_process_s": d, "ratio": c / d},
            "bit_identical": same,
        },
        config=vars(args),
    )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
