"""Record what ComfyUI's comfy.ldm functions and small blocks compute on fixed tensors, as the fixture of
tests/packs/test_surface_ldm.py (attention variants, timestep / sinusoidal embeddings, rope, the diagonal
Gaussian posterior, RMS norms, patch padding, CrossAttention / FeedForward / BasicTransformerBlock /
SpatialTransformer with seeded weights).

`run_cases(api)` builds every input from seeded generators and returns summaries of the outputs (shape, sum,
absolute sum, first values), so the fixture stays small; the test calls it with our modules. Run it inside
ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here):

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_ldm.py /work/main/tests/packs/fixtures/comfyui_ldm.json
"""

from __future__ import annotations

import hashlib
import json
import sys
from types import SimpleNamespace
from typing import Any

import torch

COMFYUI = "0.3.64 (a125cd84b054a57729b5eecab930ca9408719832)"
HEAD = 4  # values kept per output


def summary(t: Any) -> Any:
    if isinstance(t, (tuple, list)):
        return [summary(x) for x in t]
    t = t.detach()
    flat = t.to(torch.float64).flatten()
    return {
        "shape": list(t.shape),
        "dtype": str(t.dtype).replace("torch.", ""),
        "sum": short(flat.sum()),
        "abs": short(flat.abs().sum()),
        "head": [short(x) for x in flat[:HEAD]],
    }


def short(x: Any) -> float:
    return float(f"{float(x):.8g}")


def randn(seed: int, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def seed_weights(module: torch.nn.Module, seed: int) -> str:
    """Fill every parameter (in sorted name order) from one seeded generator; returns "count:sha256 prefix"
    of the "name=shape" list (the module's parameter layout)."""
    gen = torch.Generator().manual_seed(seed)
    params = dict(module.named_parameters())
    with torch.no_grad():
        for name in sorted(params):
            params[name].copy_(torch.randn(params[name].shape, generator=gen) * 0.3)
    layout = ",".join(f"{name}={list(params[name].shape)}" for name in sorted(params))
    return f"{len(params)}:{hashlib.sha256(layout.encode()).hexdigest()[:16]}"


def attention_cases(attention: Any) -> dict:
    q, k, v = randn(1, 2, 6, 12), randn(2, 2, 7, 12), randn(3, 2, 7, 12)
    mask2 = randn(4, 6, 7)
    mask3 = randn(5, 2, 6, 7)
    keep = torch.tensor([[True, True, False, True, True, True, False], [True] * 7])
    qs, ks, vs = (t.reshape(2, -1, 3, 4).transpose(1, 2).contiguous() for t in (q, k, v))
    out = {}
    for name in ("attention_basic", "attention_pytorch", "attention_split", "attention_sub_quad"):
        fn = getattr(attention, name)
        out[name] = {
            "plain": summary(fn(q, k, v, 3)),
            "mask2": summary(fn(q, k, v, 3, mask=mask2)),
            "mask3": summary(fn(q, k, v, 3, mask=mask3)),
            "skip_reshape": summary(fn(qs, ks, vs, 3, skip_reshape=True)),
            "skip_output_reshape": summary(fn(q, k, v, 3, skip_output_reshape=True)),
            "upcast_bf16": summary(fn(q.bfloat16(), k.bfloat16(), v.bfloat16(), 3, attn_precision=torch.float32)),
        }
    out["attention_basic"]["bool_keys"] = summary(attention.attention_basic(q, k, v, 3, mask=keep))
    out["attention_pytorch"]["bool_keys"] = summary(attention.attention_pytorch(q, k, v, 3, mask=keep[:, None]))
    out["default"] = [attention.default(None, 3), attention.default(2, 3), attention.exists(None)]
    return out


def block_cases(attention: Any) -> dict:
    out = {}
    x, context = randn(10, 2, 5, 16), randn(11, 2, 4, 24)

    ca = attention.CrossAttention(16, context_dim=24, heads=2, dim_head=8)
    out["cross_attention"] = {
        "names": seed_weights(ca, 20),
        "plain": summary(ca(x, context=context)),
        "value": summary(ca(randn(12, 2, 5, 16), context=randn(13, 2, 5, 24), value=randn(14, 2, 5, 24))),
        "mask": summary(ca(x, context=context, mask=randn(15, 5, 4))),
    }
    ff = attention.FeedForward(16, dim_out=8, mult=2)
    ffg = attention.FeedForward(16, mult=2, glu=True)
    out["feed_forward"] = {
        "names": seed_weights(ff, 21),
        "gelu": summary(ff(x)),
        "names_glu": seed_weights(ffg, 22),
        "glu": summary(ffg(x)),
    }

    block = attention.BasicTransformerBlock(16, 2, 8, context_dim=24)
    names = seed_weights(block, 23)

    def replace_attn2(q, k, v, extra):
        return attention.attention_basic(q, k, v, extra["n_heads"]) * 0.5

    options = {
        "block": ("input", 1),
        "block_index": 0,
        "patches": {
            "attn1_patch": [lambda n, c, val, extra: (n * 1.1, c, val * 0.9)],
            "attn1_output_patch": [lambda n, extra: n - 0.05],
            "middle_patch": [lambda h, extra: h + 0.1 * extra["dim_head"] / 8],
            "attn2_output_patch": [lambda n, extra: n * 1.2],
        },
        "patches_replace": {"attn2": {("input", 1, 0): replace_attn2}},
    }
    out["basic_transformer_block"] = {
        "names": names,
        "plain": summary(block(x, context=context)),
        "patched": summary(block(x, context=context, transformer_options=options)),
    }
    ff_in = attention.BasicTransformerBlock(
        16, 2, 8, context_dim=24, ff_in=True, gated_ff=False, switch_temporal_ca_to_sa=True
    )
    out["basic_transformer_block"]["names_ff_in"] = seed_weights(ff_in, 24)
    out["basic_transformer_block"]["ff_in"] = summary(ff_in(x, context=context))

    img = randn(16, 1, 32, 3, 2)
    conv = attention.SpatialTransformer(32, 2, 8, depth=2, context_dim=24)
    linear = attention.SpatialTransformer(32, 2, 16, depth=1, context_dim=24, use_linear=True)
    opts: dict = {}
    out["spatial_transformer"] = {
        "names": seed_weights(conv, 25),
        "conv": summary(conv(img, context=context[:1], transformer_options=opts)),
        "names_linear": seed_weights(linear, 26),
        "linear": summary(linear(img, context=[context[:1]])),
        "options": {key: val for key, val in opts.items()},
    }
    return out


def function_cases(api: SimpleNamespace) -> dict:
    out: dict = {}
    t = torch.tensor([0.0, 1.5, 999.0])
    out["timestep_embedding"] = {
        "even": summary(api.util.timestep_embedding(t, 8)),
        "odd": summary(api.util.timestep_embedding(t, 7, max_period=500)),
        "repeat_only": summary(api.util.timestep_embedding(t, 3, repeat_only=True)),
    }
    tf = torch.tensor([0.0, 0.25, 1.0])
    out["flux_timestep_embedding"] = {
        "f32": summary(api.flux_layers.timestep_embedding(tf, 9)),
        "bf16": summary(api.flux_layers.timestep_embedding(tf.bfloat16(), 8)),
        "factor": summary(api.flux_layers.timestep_embedding(tf, 6, 100, 10.0)),
    }
    pos = torch.arange(5, dtype=torch.float32)[None] * 1.5
    pe = api.flux_math.rope(pos, 8, 10000)
    q, k, v = randn(30, 1, 2, 5, 8), randn(31, 1, 2, 5, 8), randn(32, 1, 2, 5, 8)
    out["rope"] = summary(pe)
    out["apply_rope"] = summary(api.flux_math.apply_rope(q, k, pe[:, None]))
    out["flux_attention"] = summary(api.flux_math.attention(q, k, v, pe[:, None]))
    ids = torch.stack([torch.zeros(5), torch.arange(5.0), torch.arange(5.0) * 2], dim=-1)[None]
    out["embed_nd"] = summary(api.flux_layers.EmbedND(8, 10000, [2, 2, 4])(ids))
    out["sinusoidal_embedding_1d"] = summary(api.wan.sinusoidal_embedding_1d(8, torch.arange(5)))
    x = randn(33, 1, 5, 2, 8)
    out["apply_rotary_emb"] = {
        "rot": summary(api.qwen.apply_rotary_emb(x, pe[:, :, None])),
        "empty": list(api.qwen.apply_rotary_emb(x[:, :0], pe[:, :, None]).shape),
    }

    params = randn(40, 2, 8, 3, 3) * 3
    dist = api.distributions.DiagonalGaussianDistribution(params)
    other = api.distributions.DiagonalGaussianDistribution(randn(41, 2, 8, 3, 3))
    torch.manual_seed(3)
    sample = dist.sample()
    out["diagonal_gaussian"] = {
        "mode": summary(dist.mode()),
        "std": summary(dist.std),
        "var": summary(dist.var),
        "sample": summary(sample),
        "kl": summary(dist.kl()),
        "kl_other": summary(dist.kl(other)),
        "nll": summary(dist.nll(randn(42, 2, 4, 3, 3))),
        "deterministic": summary(api.distributions.DiagonalGaussianDistribution(params, deterministic=True).std),
    }

    norm = api.mmdit.RMSNorm(8, elementwise_affine=True)
    seed_weights(norm, 43)
    flux_norm = api.flux_layers.RMSNorm(8)
    seed_weights(flux_norm, 44)
    h = randn(45, 2, 3, 8)
    out["rms_norm"] = {
        "mmdit": summary(norm(h)),
        "mmdit_plain": summary(api.mmdit.RMSNorm(8)(h)),
        "flux": summary(flux_norm(h)),
        "common": summary(api.common_dit.rms_norm(h, eps=1e-3)),
    }
    img = randn(46, 1, 2, 5, 3)
    out["pad_to_patch_size"] = {
        "2d": summary(api.common_dit.pad_to_patch_size(img, (2, 2))),
        "reflect": summary(api.common_dit.pad_to_patch_size(img, (4, 2), "reflect")),
        "3d": summary(api.common_dit.pad_to_patch_size(randn(47, 1, 2, 3, 5, 4), (1, 2, 2))),
    }
    control = {"input": [randn(48, 1, 2, 2, 2), randn(49, 1, 2, 2, 2)]}
    h0 = randn(50, 1, 2, 2, 2)
    out["apply_control"] = {
        "out": summary(api.openaimodel.apply_control(h0, control, "input")),
        "left": len(control["input"]),
        "none": summary(api.openaimodel.apply_control(h0.clone(), None, "input")),
    }
    return out


def run_cases(api: SimpleNamespace) -> dict:
    return {
        "attention": attention_cases(api.attention),
        "blocks": block_cases(api.attention),
        "functions": function_cases(api),
    }


def comfyui_api() -> SimpleNamespace:
    sys.argv[1:] = [sys.argv[1], "--cpu"]
    import comfy.cli_args

    comfy.cli_args.args.cpu = True
    from comfy.ldm import common_dit
    from comfy.ldm.flux import layers as flux_layers
    from comfy.ldm.flux import math as flux_math
    from comfy.ldm.modules import attention
    from comfy.ldm.modules.diffusionmodules import mmdit, openaimodel, util
    from comfy.ldm.modules.distributions import distributions
    from comfy.ldm.qwen_image import model as qwen
    from comfy.ldm.wan import model as wan

    return SimpleNamespace(
        attention=attention,
        util=util,
        flux_layers=flux_layers,
        flux_math=flux_math,
        wan=wan,
        qwen=qwen,
        distributions=distributions,
        mmdit=mmdit,
        common_dit=common_dit,
        openaimodel=openaimodel,
    )


if __name__ == "__main__":
    path = sys.argv[1]
    api = comfyui_api()
    with torch.no_grad():
        cases = run_cases(api)
    with open(path, "w") as f:
        json.dump({"comfyui": COMFYUI, "torch": torch.__version__, "cases": cases}, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path}")
