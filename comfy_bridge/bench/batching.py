"""Throughput of batched denoising steps on one executor.

    comfy-cluster bench batching [--requests 4] [--size 64] [--repeats 5] [--threads 1] [--mixed]

`--requests` prompts (sd1-tiny, Euler, CFG; with `--mixed` alternating euler/normal at CFG 7 and dpmpp_2m/karras
at CFG 5.5, issue 41's mixed load) each send their first denoising step at the same moment,
from their own tenant, through the head to one executor process: once with batch size 1 (the steps
run one after another) and once with batch size `--requests` (one merged run). Reported: steps per
second for each (best of `--repeats` rounds, the two interleaved so machine noise hits both), their
ratio, and the largest difference between a step's batched and unbatched output.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path

# issue 41's mixed load: prompts alternate these (sampler, scheduler, cfg)
MIXED = (("euler", "normal", 7.0), ("dpmpp_2m", "karras", 5.5))


def _record_steps(n: int, size: int, mixed: bool = False) -> list:
    """The first denoise_step call of `n` KSampler runs with different prompts and seeds (with `mixed`, their
    samplers, schedulers and CFG scales alternating as MIXED says)."""
    from cluster.local import LocalRuntime
    from cluster.runtime import Runtime, use_runtime
    from cluster.scheduling.batching import Call
    from nodes.ksampler import common_ksampler
    from nodes.latent import EmptyLatentImage
    from nodes.loaders import CheckpointLoaderSimple
    from nodes.model_nodes import CLIPTextEncode

    class First(Runtime):
        """Runs the text encodes in-process and stops the sampler at its first step."""

        def __init__(self) -> None:
            self.local, self.call_ = LocalRuntime(), None

        async def call(self, fn, model, inputs, params=None, *, spread=False):
            if fn == "denoise_step":
                self.call_ = Call(fn, model, dict(inputs), params)
                raise StopAsyncIteration
            return await self.local.call(fn, model, inputs, params)

    model, clip, _ = CheckpointLoaderSimple().load_checkpoint("sd1-tiny.safetensors")

    async def one(i: int):
        rt = First()
        use_runtime(rt)
        pos = (await CLIPTextEncode().encode(clip, f"a picture of thing number {i}"))[0]
        neg = (await CLIPTextEncode().encode(clip, "blurry"))[0]
        sampler, scheduler, cfg = MIXED[i % len(MIXED)] if mixed else MIXED[0]
        try:
            await common_ksampler(
                model, 1000 + i, 20, cfg, sampler, scheduler, pos, neg, EmptyLatentImage().generate(size, size, 1)[0]
            )
        except StopAsyncIteration:
            pass
        return rt.call_

    return [asyncio.run(one(i)) for i in range(n)]


def _round(head, calls: list) -> tuple[float, list]:
    from cluster.cluster_runtime import ClusterRuntime

    async def go():
        return await asyncio.gather(
            *(
                ClusterRuntime(head, f"tenant{i}", uuid.uuid4().hex).call(c.fn, c.ref, c.inputs, c.params)
                for i, c in enumerate(calls)
            )
        )

    t0 = time.perf_counter()
    outs = asyncio.run(go())
    return time.perf_counter() - t0, outs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="comfy-cluster bench batching", description=__doc__.split("\n")[0])
    p.add_argument("--requests", type=int, default=4, help="concurrent steps, and the batch size")
    p.add_argument("--size", type=int, default=64, help="image size in pixels")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="torch threads of the executor")
    p.add_argument(
        "--mixed", action="store_true", help="alternate euler/normal at CFG 7 and dpmpp_2m/karras at CFG 5.5"
    )
    args = p.parse_args(argv)
    from cluster.bench import results

    record = results.begin("batching", argv)
    from cluster.executor.local_cluster import start_local_cluster
    from cluster.local import set_threads
    from comfy_bridge.cli.demo_models import ensure_demo_models
    from nodes.workspace import Workspace, activate

    set_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        ensure_demo_models(activate(Workspace(Path(tmp)).create()))
        calls = _record_steps(args.requests, args.size, args.mixed)
        key = calls[0].ref.key
        head, _ = start_local_cluster(1, args.threads, batch_window_s=1.0)
        try:
            best = {1: float("inf"), args.requests: float("inf")}
            rounds: dict[int, list[float]] = {cap: [] for cap in best}
            outs = {}
            for cap in best:  # warm-up: weights loaded, kernels primed
                head.set_batch_size(key, cap)
                _round(head, calls)
            for _ in range(args.repeats):
                for cap in best:
                    head.set_batch_size(key, cap)
                    seconds, outs[cap] = _round(head, calls)
                    rounds[cap].append(seconds)
                    best[cap] = min(best[cap], seconds)
            stats = head.stats()
        finally:
            head.stop()
    n = args.requests
    diff = max((a[k] - b[k]).abs().max().item() for a, b in zip(outs[1], outs[n]) for k in a)
    rate = {cap: n / s for cap, s in best.items()}
    print(
        f"{n} concurrent denoising steps ({args.size} px, sd1-tiny, "
        f"{'euler/normal and dpmpp_2m/karras alternating' if args.mixed else 'Euler'} with CFG, 1 executor, "
        f"{args.threads} thread(s)), best of {args.repeats}:"
    )
    print(f"  batch size 1: {rate[1]:8.1f} steps/s ({best[1] * 1000:.1f} ms for all {n})")
    print(
        f"  batch size {n}: {rate[n]:8.1f} steps/s ({best[n] * 1000:.1f} ms for all {n}; "
        f"{stats['batches_dispatched']} batches of {stats['parts_batched'] / max(1, stats['batches_dispatched']):g})"
    )
    print(f"  throughput ratio: {rate[n] / rate[1]:.2f}x; max |batched - unbatched| of the outputs: {diff:.3g}")
    record.write(
        {f"batch_{cap}_s": r for cap, r in rounds.items()},
        {
            "throughput_ratio": rate[n] / rate[1],
            "steps_per_s": {str(c): r for c, r in rate.items()},
            "max_abs_difference": diff,
        },
        config=vars(args),
    )
    return 0
