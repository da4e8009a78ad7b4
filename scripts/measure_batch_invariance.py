"""Where batch invariance costs, and what it costs: the numbers behind nodes/models/batch_invariant.py.

    python scripts/measure_batch_invariance.py [--threads 1] [--sizes 64,256] [--repeats 5]

1. Layers: every Conv2d / Linear of the demo sd1-tiny and sdxl-tiny UNets is fed the inputs it gets in a
   batch-16 forward pass; for each, whether its plain forward gives every sample the bits it gets at batch 1,
   at batches 2..16, and whether the batch-invariant class does.
2. GEMM rows: for a plain Linear of widths 64 to 3072 fed [batch, rows, features], the row counts per sample at
   which some sample's bits at batches 2, 3, 4 and 8 differ from its bits alone (batch_invariant.few_rows_bound).
3. Cost: one sd1-tiny forward of B samples (B/2 requests, cond + uncond each) against B/2 forwards of 2, the
   unbatched executor's way, with the per-sample convolutions of before and with the pinned oneDNN ones.
   CPU seconds (the thread's with one torch thread, the process's with more: a shared machine's waiting is
   not counted), best of --repeats rounds, the variants interleaved; compare ratios from one run.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

from nodes.models import batch_invariant as bi

BATCHES = (2, 3, 4, 8, 16)


class PerSampleConv2d(nn.Conv2d):
    """The convolution as batch_invariant ran it before: one sample at a time."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4 or x.shape[0] == 1:
            return self._conv_forward(x, self.weight, self.bias)
        return torch.cat([self._conv_forward(s, self.weight, self.bias) for s in x.split(1)])


def _load(name: str):
    from nodes.loaders import CheckpointLoaderSimple
    from nodes.models.loader import load_diffusion_model

    return load_diffusion_model(CheckpointLoaderSimple().load_checkpoint(name)[0])


def _inputs(model, b: int, size: int) -> tuple[torch.Tensor, torch.Tensor, dict]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(b, 4, size // 8, size // 8, generator=g)
    ctx = torch.randn(b, 77, model.module.config.cross_attention_dim, generator=g)
    cond = {"context": ctx, "pooled": None}
    if model.arch == "sdxl":
        cond["pooled"] = torch.randn(b, model.module.add_embedding.linear_1.in_features - 6 * 256, generator=g)
    return x, torch.rand(b, generator=g) * 999, cond


def _set_conv(module: nn.Module, cls: type) -> None:
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            m.__class__ = cls


def layers(name: str, size: int) -> None:
    model = _load(name)
    captured: dict[str, tuple[nn.Module, torch.Tensor]] = {}
    hooks = [
        m.register_forward_pre_hook(lambda mod, args, n=n: captured.__setitem__(n, (mod, args[0])))
        for n, m in model.module.named_modules()
        if isinstance(m, (nn.Conv2d, nn.Linear))
    ]
    with torch.inference_mode():
        model.apply(*_inputs(model, 16, size))
        for h in hooks:
            h.remove()
        rows: dict[tuple, list[int]] = {}  # (kind, variant) -> [layers, differing]
        for mod, x in captured.values():
            if isinstance(mod, nn.Conv2d):
                kind = f"conv {mod.kernel_size[0]}x{mod.kernel_size[1]}"
                plain = lambda t, m=mod: nn.functional.conv2d(t, m.weight, m.bias, m.stride, m.padding)  # noqa: E731
            else:
                kind = f"linear on {x.dim()}-D"
                plain = lambda t, m=mod: nn.functional.linear(t, m.weight, m.bias)  # noqa: E731
            for variant, f in (("plain", plain), ("batch-invariant", mod.forward)):
                alone = [f(x[i : i + 1]) for i in range(16)]
                differs = any(not torch.equal(f(x[:b])[i : i + 1], alone[i]) for b in BATCHES for i in range(b))
                row = rows.setdefault((kind, variant), [0, 0])
                row[0] += 1
                row[1] += differs
    for (kind, variant), (n, bad) in sorted(rows.items()):
        print(f"  {name} {size}px {kind:16s} {variant:16s}: {bad} of {n} layers round a sample differently in a batch")


def gemm_rows() -> None:
    """The rows per sample at which a plain Linear's samples round by the batch around them."""
    for features, out_features in ((64, 384), (320, 320), (768, 3072), (1280, 10240), (5120, 1280), (3072, 3072)):
        linear = nn.Linear(features, out_features)
        differing = []
        for rows in (*range(1, 33), 48, 64, 77, 256):
            x = torch.randn(8, rows, features)
            with torch.inference_mode():
                alone = [linear(x[i : i + 1]) for i in range(8)]
                if any(
                    not torch.equal(linear(x[:batch])[i : i + 1], alone[i])
                    for batch in (2, 3, 4, 8)
                    for i in range(batch)
                ):
                    differing.append(rows)
        print(f"Linear {features}->{out_features}: rows per sample that differ by batch: {differing}")


def cost(size: int, repeats: int) -> None:
    model = _load("sd1-tiny.safetensors")
    x, t, cond = _inputs(model, 8, size)

    def forward(lo: int, hi: int) -> None:
        model.apply(x[lo:hi], t[lo:hi], {k: None if v is None else v[lo:hi] for k, v in cond.items()})

    clock = time.thread_time if torch.get_num_threads() == 1 else time.process_time
    variants = {"per-sample conv (before)": PerSampleConv2d, "oneDNN-pinned conv (now)": bi.BatchInvariantConv2d}
    best: dict[tuple[str, int, str], float] = {}
    with torch.inference_mode():
        for _ in range(repeats):
            for label, cls in variants.items():
                _set_conv(model.module, cls)
                for b in (2, 4, 8):
                    for how, spans in (("batched", [(0, b)]), ("unbatched", [(j, j + 2) for j in range(0, b, 2)])):
                        start = clock()
                        for lo, hi in spans:
                            forward(lo, hi)
                        key = (label, b, how)
                        best[key] = min(best.get(key, float("inf")), clock() - start)
    base = "per-sample conv (before)"
    for b in (2, 4, 8):
        ref = best[(base, b, "unbatched")]
        cells = ", ".join(
            f"{label} {how} {best[(label, b, how)] / ref:.2f}" for label in variants for how in ("unbatched", "batched")
        )
        print(f"  sd1-tiny {size}px, {b // 2} requests (batch {b}), time / before's unbatched: {cells}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--sizes", default="64,256", help="image sizes in pixels, comma-separated")
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    from comfy_bridge.cli.demo_models import ensure_demo_models
    from nodes.workspace import Workspace, activate

    with tempfile.TemporaryDirectory() as tmp:  # the demo models, built as `bench batching` builds them
        ensure_demo_models(activate(Workspace(Path(tmp)).create()))
        run(args)


def run(args: argparse.Namespace) -> None:
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"torch {torch.__version__}, {args.threads} thread(s), oneDNN {torch.backends.mkldnn.is_available()}")
    for size in sizes:
        for name in ("sd1-tiny.safetensors", "sdxl-tiny.safetensors"):
            layers(name, size)
    gemm_rows()
    for size in sizes:
        cost(size, args.repeats)


if __name__ == "__main__":
    main()
