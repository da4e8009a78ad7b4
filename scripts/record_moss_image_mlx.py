"""Record evaluations of an independent MOSS-Image implementation on the demo's tiny transformer, as a fixture of
tests/models/test_moss_image.py. ComfyUI's MOSS code (0.10.0 predates the model; the newest source is not
readable here) and OpenMOSS's pipeline_moss_image.py are not available, and diffusers/transformers do not have
the model, so the reference is moss-image-mlx 0.2.0 (PyPI, Apache-2.0; its dit.py "mirrors MOSSImageTransformer in
the official pipeline_moss_image.py operation by operation"), run on MLX's CPU backend at development time. Its
code is imported from the installed wheel, nothing of it is copied here:

    pip install --target /tmp/mlxenv mlx==0.32.4 mlx-cpu==0.32.4
    pip download --no-deps moss-image-mlx==0.2.0 && unzip moss_image_mlx-0.2.0-py3-none-any.whl -d /tmp/mossmlx
    PYTHONPATH=/tmp/mlxenv nice -n 19 python scripts/record_moss_image_mlx.py /tmp/mossmlx/moss_image_mlx/dit.py \\
        <models>/diffusion_models/moss_image_tiny.safetensors tests/models/fixtures/moss_image_mlx.json

The tiny file's ComfyUI layout (fused q/k/v) is split back into the official names the MLX module loads; its
weights are taken as float32 (the bf16 values exactly), and the module computes in float32. Per case: seeded
latents, text states and a timestep; the velocity, with and without block 22 skipped (skip-layer guidance)."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import sys

import numpy as np
import torch
from safetensors.torch import load_file

DIT, WEIGHTS, OUT = sys.argv[1:4]
CASES = [("square", (1, 128, 4, 4), 7, 999.0, ()), ("wide_skip_22", (1, 128, 3, 5), 12, 415.5, (22,))]


def b64(a: np.ndarray) -> dict:
    a = np.ascontiguousarray(a, dtype=np.float32)
    return {"shape": list(a.shape), "f32": base64.b64encode(a.tobytes()).decode()}


def seeded(seed: int, *shape: int) -> np.ndarray:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).numpy()


def main() -> None:
    import mlx.core as mx

    spec = importlib.util.spec_from_file_location("moss_mlx_dit", DIT)
    dit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dit)
    sd = {k: v.float().numpy() for k, v in load_file(WEIGHTS).items()}
    official = {}
    for k, v in sd.items():
        if k.endswith(".proj.qkv.weight") and k.startswith("layers."):
            for name, part in zip("qkv", np.split(v, 3, axis=0)):
                official[k.replace(".qkv.", f".{name}.")] = part
        else:
            official[k] = v
    dim = sd["shared_block_modulation.weight"].shape[0] // 6
    config = dict(
        dim=dim,
        ffn_dim=sd["layers.0.proj.ffn_up_gate.weight"].shape[0] // 2,
        num_heads=dim // sd["layers.0.q_norm.weight"].shape[0],
        num_layers=1 + max(int(k.split(".")[1]) for k in sd if k.startswith("layers.")),
        text_dim=sd["text_embedder.proj.weight"].shape[1],
        freq_dim=sd["time_embedding.0.weight"].shape[1],
        latent_channels=sd["video_embedder.weight"].shape[1],
    )
    model = dit.MOSSImageTransformer(**config)
    weights = dit.MOSSImageTransformer.sanitize({k: mx.array(v) for k, v in official.items()})
    model.load_weights(list(weights.items()), strict=True)
    cases = []
    for i, (name, shape, tokens, timestep, skip) in enumerate(CASES):
        x = seeded(10 + i, *shape)
        context = seeded(20 + i, 1, tokens, config["text_dim"])
        out = model(mx.array(x), timestep, mx.array(context), skip)
        cases.append(
            {"name": name, "x": b64(x), "context": b64(context), "timestep": timestep, "skip_layers": list(skip)}
            | {"velocity": b64(np.array(out))}
        )
    record = {
        "reference": "moss-image-mlx 0.2.0 dit.MOSSImageTransformer on mlx 0.32.4 (CPU), float32",
        "recorded_by": "scripts/record_moss_image_mlx.py",
        "weights_sha256": hashlib.sha256(open(WEIGHTS, "rb").read()).hexdigest(),
        "cases": cases,
    }
    with open(OUT, "w") as f:
        json.dump(record, f, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
