"""Engine overhead: the default workflow through `run` (graph engine + one ModelFn call per step)
against a plain diffusers StableDiffusionPipeline on the same loaded tiny model, in one process.

Both paths do the same work: encode both prompts, 20 Euler steps with CFG (UNet at batch 2),
decode, save a PNG. The two paths run in alternating order, N rounds; printed are the ratio of their
minimum times and the median of the rounds' ratios (each round's two runs see the same machine load),
and the engine alone: the same run with every ModelFn output replayed from a record, which bounds the
engine's cost without the machine's noise in two 0.2 s runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from cluster.local import LocalRuntime
from cluster.runtime import Runtime, use_runtime

REPO = Path(__file__).resolve().parents[2]


def sd1_prompt(size: int) -> dict:
    prompt = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
    prompt["5"]["inputs"].update(width=size, height=size)
    return prompt


class _Replay(Runtime):
    """Records the ModelFn outputs of one run, then answers the same calls from the record in call
    order: a run through it costs everything but the models (graph engine, node bodies, sampler glue,
    the PNG), the engine's own share free of the noise in the end-to-end times."""

    def __init__(self) -> None:
        self.local, self.record, self.replay = LocalRuntime(), [], None

    async def call(self, fn, model, inputs, params=None, *, spread=False):
        if self.replay is None:
            out = await self.local.call(fn, model, inputs, params)
            self.record.append(out)
            return out
        return next(self.replay)

    def start_replay(self) -> None:
        self.replay = iter(self.record)


def _engine_alone(prompt: dict, registry, repeats: int) -> float:
    """Seconds per run of the engine alone (min of `repeats`)."""
    from cluster.local import run_on_compute
    from comfy_bridge.cli.run import run_prompt

    replay = _Replay()

    async def once():
        use_runtime(replay)
        return await run_prompt(prompt, None, registry, show_progress=False)

    run_on_compute(once)
    best = float("inf")
    for _ in range(repeats):
        replay.start_replay()
        t0 = time.perf_counter()
        run_on_compute(once)
        best = min(best, time.perf_counter() - t0)
    return best


def _diffusers_runner(ckpt: Path, prompt: dict, out_dir: Path):
    from transformers.utils import logging as tlog

    tlog.set_verbosity_error()  # the pipeline's image-processor imports warn about torchvision, unused here
    from diffusers import EulerDiscreteScheduler, StableDiffusionPipeline
    from diffusers.utils import logging as dlog

    from nodes.loaders import make_ref, probe_arch
    from nodes.models.loader import load_diffusion_model, load_text_encoder, load_vae

    arch, _ = probe_arch(ckpt)
    unet = load_diffusion_model(make_ref("diffusion_model", arch, [ckpt]))
    clip = load_text_encoder(make_ref("text_encoder", arch, [ckpt]))
    vae = load_vae(make_ref("vae", arch, [ckpt]))
    dlog.disable_progress_bar()
    sched = EulerDiscreteScheduler(
        beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", timestep_spacing="linspace", steps_offset=1
    )
    pipe = StableDiffusionPipeline(
        vae=vae.module,
        text_encoder=None,
        tokenizer=None,
        unet=unet.module,
        scheduler=sched,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipe.set_progress_bar_config(disable=True)
    sampler = prompt["3"]["inputs"]
    size = prompt["5"]["inputs"]["width"]

    def run() -> None:
        with torch.inference_mode():
            pos, _ = clip.encode(clip.tokenize(prompt["6"]["inputs"]["text"]))
            neg, _ = clip.encode(clip.tokenize(prompt["7"]["inputs"]["text"]))
            image = pipe(
                prompt_embeds=pos,
                negative_prompt_embeds=neg,
                height=size,
                width=size,
                num_inference_steps=sampler["steps"],
                guidance_scale=sampler["cfg"],
                generator=torch.Generator().manual_seed(sampler["seed"]),
            ).images[0]
            image.save(out_dir / "diffusers.png", compress_level=4)

    return run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="comfy-cluster bench engine", description=__doc__)
    p.add_argument("--sizes", type=int, nargs="+", default=[64, 128])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (1: on a 2-core machine two OpenMP teams in one process slow each other)",
    )
    args = p.parse_args(argv)
    from cluster.bench import results

    record = results.begin("engine", argv)
    rounds, figure = {}, {}
    from cluster.local import COMPUTE, run_on_compute, set_threads

    set_threads(args.threads)

    from comfy_bridge.cli.demo_models import ensure_demo_models
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry
    from nodes.workspace import Workspace, activate

    with tempfile.TemporaryDirectory() as tmp:
        ws = activate(Workspace(Path(tmp)).create())
        ensure_demo_models(ws)
        registry = build_registry(ws)
        ckpt = ws.full_path("checkpoints", "sd1-tiny.safetensors")
        print(
            f"default workflow (sd1-tiny, 20 steps euler, cfg 8), torch threads {args.threads}, min of {args.repeats}"
        )
        print(f"{'size':>6} {'run (s)':>10} {'diffusers (s)':>14} {'ratio':>7} {'paired':>7} {'engine alone':>15}")
        print(
            "  (ratio of the minima; median of the rounds' ratios; the engine with every ModelFn output "
            "replayed, and its share of the run)"
        )
        for size in args.sizes:
            prompt = sd1_prompt(size)
            # as `comfy-cluster run` does it (comfy_bridge.cli.run.run_workflow_file)
            ours = lambda: run_on_compute(lambda: run_prompt(prompt, None, registry, show_progress=False))  # noqa: E731
            # The pipeline runs on the thread our ModelFns run on: torch's OpenMP team is per thread, and a
            # second team's idle spinning would slow whichever side ran next.
            pipeline = _diffusers_runner(ckpt, prompt, Path(tmp))
            theirs = lambda: COMPUTE.submit(pipeline).result()  # noqa: E731
            ours(), theirs()  # warm-up: load weights, first-call allocations
            t_ours, t_theirs = [], []
            for i in range(args.repeats):
                pair = ((ours, t_ours), (theirs, t_theirs))
                for fn, acc in pair if i % 2 == 0 else pair[::-1]:  # alternate who goes first
                    t0 = time.perf_counter()
                    fn()
                    acc.append(time.perf_counter() - t0)
            a, b = min(t_ours), min(t_theirs)
            # each round's two runs are back to back, so their ratio sees the same machine load
            paired = statistics.median(x / y for x, y in zip(t_ours, t_theirs))
            alone = _engine_alone(prompt, registry, args.repeats)
            print(
                f"{size:>6} {a:>10.4f} {b:>14.4f} {a / b:>7.3f} {paired:>7.3f} {alone * 1e3:>9.2f} ms = {alone / a:.1%}"
            )
            rounds[str(size)] = {"run_s": t_ours, "diffusers_s": t_theirs}
            figure[str(size)] = {
                "ratio_min": a / b,
                "paired_median": paired,
                "engine_alone_ms": alone * 1e3,
                "engine_share": alone / a,
            }
    record.write(rounds, figure, config=vars(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
