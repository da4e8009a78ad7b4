"""A tiny stand-in for Depth Anything 3 Mono-Large (Comfy-Org/Depth-Anything-3's
geometry_estimation/depth_anything_3_mono_large.safetensors): ComfyUI's key layout (the DINOv2 under backbone. in
its renamed names: embeddings, encoder.layer.N.attention.attention.query, layer_scale1.lambda1, mlp.fc1, layernorm;
the DPT head under head.: projects, resize_layers, scratch with its layerN_rn, refinenetN, output_conv1,
output_conv2 and sky_output_conv2), at tiny widths: a 64-wide ViT of ViT-L's 24 layers (so the head reads layers
4, 11, 17 and 23 as Mono-Large's does; one 64-wide attention head as ViT-L's are) with its 37x37 position table,
projections of 8-32 channels, a 16-wide fusion chain. float16, byte-deterministic (seeded draws, no metadata)."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from .depth_anything3 import DPTHead

FILE = "geometry_estimation/depth_anything_3_mono_large_tiny.safetensors"
SEED = 3303
DIM, DEPTH, GRID = 64, 24, 37
CHANNELS, WIDTH = (8, 16, 32, 32), 16


def _vit_shapes() -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {
        "embeddings.patch_embeddings.projection.weight": (DIM, 3, 14, 14),
        "embeddings.patch_embeddings.projection.bias": (DIM,),
        "embeddings.position_embeddings": (1, GRID * GRID + 1, DIM),
        "embeddings.cls_token": (1, 1, DIM),
        "layernorm.weight": (DIM,),
        "layernorm.bias": (DIM,),
    }
    for i in range(DEPTH):
        p = f"encoder.layer.{i}."
        for name in ("attention.attention.query", "attention.attention.key", "attention.attention.value"):
            shapes[p + name + ".weight"], shapes[p + name + ".bias"] = (DIM, DIM), (DIM,)
        shapes[p + "attention.output.dense.weight"], shapes[p + "attention.output.dense.bias"] = (DIM, DIM), (DIM,)
        shapes[p + "mlp.fc1.weight"], shapes[p + "mlp.fc1.bias"] = (4 * DIM, DIM), (4 * DIM,)
        shapes[p + "mlp.fc2.weight"], shapes[p + "mlp.fc2.bias"] = (DIM, 4 * DIM), (DIM,)
        for name in ("norm1", "norm2"):
            shapes[p + name + ".weight"], shapes[p + name + ".bias"] = (DIM,), (DIM,)
        shapes[p + "layer_scale1.lambda1"], shapes[p + "layer_scale2.lambda1"] = (DIM,), (DIM,)
    return shapes


def tiny_da3_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    shapes = {"backbone." + k: v for k, v in _vit_shapes().items()}
    head = DPTHead(DIM, CHANNELS, WIDTH, outputs=1, sky=True)
    shapes |= {"head." + k: tuple(v.shape) for k, v in head.state_dict().items()}
    gen = torch.Generator().manual_seed(seed)
    sd = {}
    for key in sorted(shapes):
        shape = shapes[key]
        if key.endswith("lambda1"):
            sd[key] = 0.1 + 0.02 * torch.randn(shape, generator=gen)  # small layer scales keep 24 blocks tame
        elif len(shape) == 1 and "norm" in key and key.endswith("weight"):
            sd[key] = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        elif len(shape) == 1:
            sd[key] = 0.05 * torch.randn(shape, generator=gen)
        else:
            fan_in = torch.Size(shape)[1:].numel()
            if key.startswith("head.resize_layers.") and len(shape) == 4 and shape[-1] in (2, 4):
                fan_in = shape[0]  # a transposed convolution's weight is [in, out, k, k]: each output sees `in`
            # the head's convolutions at a larger gain (its ReLUs would fade a 0.5 gain to a flat depth), its last
            # ones larger still: depths over a few units and a sky probability over 0.3 in part of the image
            gain = 0.5 if key.startswith("backbone.") else 0.75
            if key.endswith("output_conv2.2.weight"):
                gain = 3.0
            sd[key] = torch.randn(shape, generator=gen) * (gain / fan_in**0.5)
    # a depth logit near 0.5 and a sky logit near 0.1 (part of the image sky, part not)
    sd["head.scratch.output_conv2.2.bias"] = torch.tensor([0.5])
    sd["head.scratch.sky_output_conv2.2.bias"] = torch.tensor([0.1])
    return {k: v.to(torch.float16).contiguous() for k, v in sd.items()}


def build_demo_depth_anything3(models_dir: Path) -> list[Path]:
    path = Path(models_dir) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tiny_da3_state_dict(), str(path))
    return [path]
