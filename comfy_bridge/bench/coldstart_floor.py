"""The floor of `bench coldstart`: what a plain script needs, from process start to a saved image, for the
work a fresh server's first prompt does. It reads an SD1 ldm checkpoint with safetensors (memory-mapped),
converts the weights once into float32 modules built on the meta device (diffusers' UNet2DConditionModel
and AutoencoderKL, transformers' CLIPTextModel; the key names mapped by nodes.models' renaming tables,
which copy nothing), encodes two 77-token prompts, runs Euler steps with classifier-free guidance (the UNet
at batch 2, as ComfyUI's KSampler does) on the normal schedule, decodes and writes a PNG. No engine, no
server, no cache, no batch-invariant layers.

It starts with the server's import economies, so that the floor is the least this work needs rather than
what a script written without them pays: libgomp's spin count lowered before torch is imported (`serve`'s
GOMP_SPINCOUNT), no cyclic garbage collection while it starts (as `serve` and its executors), and
`nodes.models` imported before diffusers and transformers, so its deferred imports (nodes/models/
lean_imports.py) keep the model packages, torch._dynamo and scipy out as they do in an executor. `--plain`
runs it as a plain script instead: `from diffusers import ...` first, the defaults of torch and Python.

    python -m comfy_bridge.bench.coldstart_floor CHECKPOINT --size 256 --steps 4 --out image.png [--plain]

Prints one JSON line: the phases' seconds since the script started (its imports included), and the wall clock
time (`image_at`) at which the image was on disk.
"""

from __future__ import annotations

import time

T_START = time.perf_counter()

import gc  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

# before torch is imported: read from argv, as argparse runs later
PLAIN = "--plain" in sys.argv[1:]
# `serve`'s value (comfy_bridge.cli.serve.GOMP_SPINCOUNT; a test keeps them equal), not imported from there:
# the CLI's modules cost a second that the floor does not need
GOMP_SPINCOUNT = "10000"
if not PLAIN:
    os.environ.setdefault("GOMP_SPINCOUNT", GOMP_SPINCOUNT)
    gc.disable()

import argparse  # noqa: E402
import json  # noqa: E402

import torch  # noqa: E402


def _meta_build(factory, weights: dict[str, torch.Tensor]) -> torch.nn.Module:
    with torch.device("meta"):
        module = factory()
    module.load_state_dict({k: v.float() for k, v in weights.items()}, strict=True, assign=True)
    return module.eval().requires_grad_(False)


def normal_sigmas(steps: int) -> torch.Tensor:
    """ComfyUI's "normal" schedule of SD1's discrete model sampling (scaled-linear betas, 1000 steps)."""
    betas = torch.linspace(0.00085**0.5, 0.012**0.5, 1000, dtype=torch.float64) ** 2
    sigmas = ((1 - torch.cumprod(1 - betas, 0)) / torch.cumprod(1 - betas, 0)) ** 0.5
    log_sigmas = sigmas.log().float()
    ts = torch.linspace(999, 0, steps)
    low, frac = ts.floor().long(), ts.frac()
    high = (low + 1).clamp(max=999)
    out = ((1 - frac) * log_sigmas[low] + frac * log_sigmas[high]).exp()
    return torch.cat([out, out.new_zeros(1)]), log_sigmas


def timestep(sigma: torch.Tensor, log_sigmas: torch.Tensor) -> torch.Tensor:
    """The discrete timestep nearest to `sigma`, as ComfyUI's ModelSamplingDiscrete gives the UNet."""
    return (sigma.log() - log_sigmas[:, None]).abs().argmin(dim=0).view(sigma.shape)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m comfy_bridge.bench.coldstart_floor", description=__doc__)
    p.add_argument("checkpoint")
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--cfg", type=float, default=8.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=os.devnull)
    p.add_argument(
        "--plain",
        action="store_true",
        help="a plain script: diffusers and transformers imported whole, torch's and Python's defaults",
    )
    args = p.parse_args(argv)
    marks: dict[str, float] = {}

    def mark(name: str) -> None:
        marks[name] = round(time.perf_counter() - T_START, 3)

    if not args.plain:
        import nodes.models  # noqa: F401  (first: defers what the model code imports and an image never runs)
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from PIL import Image
    from safetensors.torch import load_file
    from transformers import CLIPTextModel

    from nodes.models import clip as clip_mod
    from nodes.models import unet as unet_mod
    from nodes.models import vae as vae_mod

    mark("imports")
    sd = load_file(args.checkpoint)  # a memory map: nothing read yet
    unet_sd = unet_mod.strip_prefix(sd, unet_mod.LDM_UNET_PREFIX)
    layout = unet_mod.infer_layout({k: tuple(v.shape) for k, v in unet_sd.items()})
    unet = _meta_build(
        lambda: UNet2DConditionModel(**unet_mod.diffusers_config(layout, "sd1")),
        unet_mod.ldm_to_diffusers(unet_sd, layout),
    )
    vsd = vae_mod.ldm_to_diffusers(unet_mod.strip_prefix(sd, vae_mod.LDM_VAE_PREFIX))
    vae = _meta_build(lambda: AutoencoderKL(**vae_mod.diffusers_config(vsd)), vsd)
    tsd = clip_mod.hf_keys(sd, "cond_stage_model.transformer.")
    cfg = clip_mod.clip_config(tsd, "quick_gelu")
    te = _meta_build(lambda: CLIPTextModel(cfg), tsd)
    for module in te.modules():  # the one buffer no file holds
        if getattr(module, "position_ids", None) is not None and module.position_ids.is_meta:
            module.register_buffer("position_ids", torch.arange(77).expand(1, -1), persistent=False)
    mark("loaded")
    with torch.inference_mode():
        ids = torch.full((1, 77), cfg.eos_token_id)
        ids[0, 0] = cfg.bos_token_id
        conds = [te(input_ids=ids).last_hidden_state for _ in range(2)]  # the positive and negative prompt
        context = torch.cat(conds)
        mark("encoded")
        sigmas, log_sigmas = normal_sigmas(args.steps)
        g = torch.Generator().manual_seed(args.seed)
        x = torch.randn(1, 4, args.size // 8, args.size // 8, generator=g) * sigmas[0]
        for i in range(args.steps):
            s = sigmas[i]
            xin = torch.cat([x, x]) / (s**2 + 1) ** 0.5
            eps = unet(xin, timestep(s.reshape(1), log_sigmas).expand(2), encoder_hidden_states=context).sample
            den_c, den_u = (x - eps[:1] * s), (x - eps[1:] * s)
            denoised = den_u + (den_c - den_u) * args.cfg
            x = x + (x - denoised) / s * (sigmas[i + 1] - s)
        mark("sampled")
        image = vae.decode(x / 0.18215).sample
        pixels = ((image[0].clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8).permute(1, 2, 0).numpy()
        Image.fromarray(pixels).save(args.out, format="PNG")
        mark("image")
    marks["image_at"] = time.time()  # the wall clock when the image was on disk: the caller's stop watch
    from nodes.models.lean_imports import is_loaded

    # which of the modules the server defers this run imported for real (none, unless --plain)
    imported = [m for m in ("torch._dynamo", "diffusers.models.transformers", "scipy.stats") if is_loaded(m)]
    print(json.dumps({**marks, "imported": imported}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
