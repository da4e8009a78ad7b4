"""What a monolithic Diffusers function instance pays before its weights load: the start-up S of the
simulator's baselines (`comfy-cluster simulate --baseline-startup`), measured on this machine.

    comfy-cluster bench startup [--rounds 5] [--json OUT]

Each round starts fresh processes, alternating the pipelines (Flux1-Dev, SD3.5-Large: S1 workflows), and
times in each, from the parent's `Popen` to:
- `process`: the child's first statement (interpreter start-up);
- `torch`: `import torch`;
- `diffusers`: the pipeline's classes from diffusers and transformers imported;
- `build`: the pipeline's modules (transformer, text encoders, VAE, scheduler) built from their published
  configs on the meta device, as `from_pretrained` does before it reads weights, and the pipeline assembled;
- `warmup`: one forward of the transformer on meta tensors (the framework's first-call work, no arithmetic).
Printed: each phase's median over the rounds, the total's, the child's CPU seconds (user + system; above the
total where torch's threads run in parallel: the start-up is CPU-bound, so faster or idler cores shorten it),
S = the smaller pipeline median of the total, and the load average before and after. This is a CPU figure: a GPU instance also creates its CUDA context and may capture
graphs or compile (vLLM-Omni's engine start-up more still), so it is a lower bound for S on a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

PHASES = ("process", "torch", "diffusers", "build", "warmup")
PIPELINES = ("flux1-dev", "sd3.5-large")

# Published model configs (the numbers in each model's config.json), so nothing is fetched
CLIP_L = dict(
    vocab_size=49408,
    hidden_size=768,
    intermediate_size=3072,
    num_hidden_layers=12,
    num_attention_heads=12,
    max_position_embeddings=77,
    projection_dim=768,
    hidden_act="quick_gelu",
)
CLIP_G = dict(
    vocab_size=49408,
    hidden_size=1280,
    intermediate_size=5120,
    num_hidden_layers=32,
    num_attention_heads=20,
    max_position_embeddings=77,
    projection_dim=1280,
    hidden_act="gelu",
)
T5_XXL = dict(
    vocab_size=32128,
    d_model=4096,
    d_kv=64,
    d_ff=10240,
    num_layers=24,
    num_heads=64,
    feed_forward_proj="gated-gelu",
    is_encoder_decoder=False,
)
VAE_16 = dict(
    in_channels=3,
    out_channels=3,
    latent_channels=16,
    block_out_channels=(128, 256, 512, 512),
    layers_per_block=2,
    down_block_types=("DownEncoderBlock2D",) * 4,
    up_block_types=("UpDecoderBlock2D",) * 4,
    use_quant_conv=False,
    use_post_quant_conv=False,
)
FLUX1_DEV = dict(
    patch_size=1,
    in_channels=64,
    num_layers=19,
    num_single_layers=38,
    attention_head_dim=128,
    num_attention_heads=24,
    joint_attention_dim=4096,
    pooled_projection_dim=768,
    guidance_embeds=True,
    axes_dims_rope=(16, 56, 56),
)
SD35_LARGE = dict(
    sample_size=128,
    patch_size=2,
    in_channels=16,
    num_layers=38,
    attention_head_dim=64,
    num_attention_heads=38,
    joint_attention_dim=4096,
    caption_projection_dim=2432,
    pooled_projection_dim=2048,
    out_channels=16,
    pos_embed_max_size=192,
    qk_norm="rms_norm",
)


def _flux(torch, diffusers, transformers):
    with torch.device("meta"):
        transformer = diffusers.FluxTransformer2DModel(**FLUX1_DEV)
        pipe = diffusers.FluxPipeline(
            scheduler=diffusers.FlowMatchEulerDiscreteScheduler(shift=3.0, use_dynamic_shifting=True),
            vae=diffusers.AutoencoderKL(**VAE_16),
            tokenizer=None,
            tokenizer_2=None,
            transformer=transformer,
            text_encoder=transformers.CLIPTextModel(transformers.CLIPTextConfig(**CLIP_L)),
            text_encoder_2=transformers.T5EncoderModel(transformers.T5Config(**T5_XXL)),
        )
    return pipe, lambda: _flux_forward(torch, pipe.transformer)


def _flux_forward(torch, transformer) -> None:
    tokens, text = 16 * 16, 512  # a 256x256 image: 32x32 latents packed 2x2
    m = dict(device="meta")
    transformer(
        hidden_states=torch.empty(1, tokens, 64, **m),
        encoder_hidden_states=torch.empty(1, text, 4096, **m),
        pooled_projections=torch.empty(1, 768, **m),
        timestep=torch.empty(1, **m),
        img_ids=torch.empty(tokens, 3, **m),
        txt_ids=torch.empty(text, 3, **m),
        guidance=torch.empty(1, **m),
    )


def _sd3(torch, diffusers, transformers):
    with torch.device("meta"):
        pipe = diffusers.StableDiffusion3Pipeline(
            scheduler=diffusers.FlowMatchEulerDiscreteScheduler(shift=3.0),
            vae=diffusers.AutoencoderKL(**VAE_16),
            transformer=diffusers.SD3Transformer2DModel(**SD35_LARGE),
            text_encoder=transformers.CLIPTextModelWithProjection(transformers.CLIPTextConfig(**CLIP_L)),
            text_encoder_2=transformers.CLIPTextModelWithProjection(transformers.CLIPTextConfig(**CLIP_G)),
            text_encoder_3=transformers.T5EncoderModel(transformers.T5Config(**T5_XXL)),
            tokenizer=None,
            tokenizer_2=None,
            tokenizer_3=None,
        )
    m = dict(device="meta")
    return pipe, lambda: pipe.transformer(
        hidden_states=torch.empty(1, 16, 32, 32, **m),
        encoder_hidden_states=torch.empty(1, 333, 4096, **m),
        pooled_projections=torch.empty(1, 2048, **m),
        timestep=torch.empty(1, **m),
    )


def child(pipeline: str) -> dict[str, float]:
    """Run in a fresh process: the wall-clock time at the end of each phase (the parent subtracts)."""
    at = {"process": time.time()}
    import torch

    at["torch"] = time.time()
    import diffusers
    import transformers

    build = {"flux1-dev": _flux, "sd3.5-large": _sd3}[pipeline]
    at["diffusers"] = time.time()
    with torch.inference_mode():
        _, warm = build(torch, diffusers, transformers)
        at["build"] = time.time()
        warm()
    at["warmup"] = time.time()
    return at


def time_one(pipeline: str) -> dict[str, float]:
    """Seconds each phase took in one fresh process, and their sum."""
    cpu0 = _children_cpu()
    t0 = time.time()
    # the file itself, not `-m`: the package's own imports are no part of an instance's start-up
    done = subprocess.run(
        [sys.executable, __file__, "--child", pipeline],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    at = json.loads(done.stdout.strip().splitlines()[-1])
    out, prev = {}, t0
    for phase in PHASES:
        out[phase], prev = at[phase] - prev, at[phase]
    out["total"] = at["warmup"] - t0
    out["cpu"] = _children_cpu() - cpu0  # the child's CPU seconds: what the total is without contention
    return out


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(rounds: int, pipelines: tuple[str, ...] = PIPELINES) -> dict:
    """`rounds` rounds, each timing every pipeline once, the order alternating between rounds so the machine's
    load changes weigh on each alike."""
    load_before = os.getloadavg()
    runs: dict[str, list[dict[str, float]]] = {p: [] for p in pipelines}
    for r in range(rounds):
        for p in pipelines if r % 2 == 0 else pipelines[::-1]:
            runs[p].append(time_one(p))
    fields = (*PHASES, "total", "cpu")
    median = {p: {k: statistics.median(run[k] for run in runs[p]) for k in fields} for p in pipelines}
    return {
        "rounds": rounds,
        "runs": runs,
        "median": median,
        "startup_s": min(m["total"] for m in median.values()),
        "loadavg_before": list(load_before),
        "loadavg_after": list(os.getloadavg()),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
    }


def report(d: dict) -> str:
    lines = [
        f"{d['rounds']} rounds, fresh processes, alternating; medians (s); load average "
        f"{d['loadavg_before'][0]:.2f} before, {d['loadavg_after'][0]:.2f} after, {d['cpus']} CPUs"
    ]
    lines.append("pipeline     " + " ".join(f"{k:>9}" for k in (*PHASES, "total", "cpu")))
    for p, m in d["median"].items():
        lines.append(f"{p:<12} " + " ".join(f"{m[k]:9.2f}" for k in (*PHASES, "total", "cpu")))
    lines.append(f"S (lower bound, no CUDA context, graph capture or compilation): {d['startup_s']:.2f} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="comfy-cluster bench startup", description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--pipelines", nargs="+", choices=PIPELINES, default=list(PIPELINES))
    p.add_argument("--child", choices=PIPELINES, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child)))
        return 0
    from cluster.bench import results

    record = results.begin("startup", argv)
    d = measure(args.rounds, tuple(args.pipelines))
    print(report(d))
    record.write(d["runs"], {"startup_s": d["startup_s"], "median": d["median"]}, config=vars(args))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
