"""Record what ComfyUI 0.3.64's own MMDiT computes for tiny SD3.5 Large and SD3.5 Medium diffusion models in
their real key layouts, as a fixture for our SD3.5 support.

Run inside ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here):

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \
        /work/main/scripts/record_comfyui_sd35.py /work/main/tests/models/fixtures/comfyui_sd35.json

- The layouts come from ComfyUI itself: its MMDiT class is built with SD3.5 Large's features (RMS qk-norm,
  `ln_q`/`ln_k` in both the image and the text stream) and SD3.5 Medium's (those plus a second image
  self-attention, `x_block.attn2`, in the first blocks), at tiny widths (depth 3: 192 wide, 3 heads; 64-wide
  context, 32-wide pooled vector). Its parameter names and shapes are the file's keys, as in the released
  files under `model.diffusion_model.`.
- The weights are seeded (`seeded_weights`: one generator, keys in sorted order; the test re-makes them with
  the same calls), so the fixture holds only key names, shapes and outputs.
- ComfyUI's model detection (detect_unet_config) reads the prefixed state dict; the MMDiT it configures loads
  the weights strictly and runs forward passes on seeded inputs (even and odd latent sizes, two timesteps).
"""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu

OUT = sys.argv[1]
comfyui_on_cpu()
import comfy.model_detection  # noqa: E402
import comfy.ops  # noqa: E402
import comfy.utils  # noqa: E402
from comfy.ldm.modules.diffusionmodules.mmdit import OpenAISignatureMMDITWrapper  # noqa: E402

COMMIT = "a125cd84b054a57729b5eecab930ca9408719832"
PREFIX = "model.diffusion_model."
VARIANTS = {
    "sd35_large": {"qk_norm": "rms", "x_block_self_attn_layers": []},
    "sd35_medium": {"qk_norm": "rms", "x_block_self_attn_layers": [0, 1]},
}


def seeded_weights(shapes: dict[str, list[int]], seed: int) -> dict[str, torch.Tensor]:
    """Weights as the test makes them: RMS-norm scales near 1, everything else small, in sorted key order."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for key in sorted(shapes):
        t = torch.randn(shapes[key], generator=g)
        out[key] = 1.0 + 0.1 * t if key.endswith((".ln_q.weight", ".ln_k.weight")) else 0.05 * t
    return out


def inputs(seed: int, shape: list[int], tokens: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x, context, y) as the test makes them: one generator, drawn in this order."""
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(shape, generator=g),
        torch.randn(shape[0], tokens, 64, generator=g),
        torch.randn(shape[0], 32, generator=g),
    )


def record(name: str, features: dict, seed: int) -> dict:
    layout = OpenAISignatureMMDITWrapper(
        input_size=None,
        patch_size=2,
        in_channels=16,
        out_channels=16,
        depth=3,
        adm_in_channels=32,
        context_embedder_config={"target": "torch.nn.Linear", "params": {"in_features": 64, "out_features": 192}},
        num_patches=16 * 16,
        pos_embed_max_size=16,
        pos_embed_scaling_factor=None,
        dtype=torch.float32,
        operations=comfy.ops.disable_weight_init,
        **features,
    )
    shapes = {PREFIX + k: list(v.shape) for k, v in layout.state_dict().items()}
    ckpt = seeded_weights(shapes, seed)
    sd = comfy.utils.state_dict_prefix_replace(dict(ckpt), {PREFIX: ""}, filter_keys=True)
    config = comfy.model_detection.detect_unet_config(sd, "")
    assert config["qk_norm"] == "rms" and config["x_block_self_attn_layers"] == features["x_block_self_attn_layers"]
    model = OpenAISignatureMMDITWrapper(**config, dtype=torch.float32, operations=comfy.ops.disable_weight_init)
    model.load_state_dict(sd, strict=True)
    cases = []
    for case_seed, shape, tokens, t in ((1, [2, 16, 8, 8], 20, [250.0, 800.0]), (2, [1, 16, 9, 10], 7, [999.0])):
        x, context, y = inputs(case_seed, shape, tokens)
        with torch.no_grad():
            out = model(x, torch.tensor(t), context=context, y=y)
        cases.append({"seed": case_seed, "shape": shape, "tokens": tokens, "timesteps": t, "out": b64(out)})
    print(name, len(shapes), "tensors,", sum(torch.Size(s).numel() for s in shapes.values()), "weights")
    return {
        "weights_seed": seed,
        "shapes": shapes,
        "detected": {k: config[k] for k in ("depth", "qk_norm", "x_block_self_attn_layers", "pos_embed_max_size")},
        "cases": cases,
    }


def main() -> None:
    fixture = {
        "note": (f"Recorded by scripts/record_comfyui_sd35.py with ComfyUI 0.3.64's MMDiT (commit {COMMIT})."),
        **{name: record(name, features, seed) for seed, (name, features) in enumerate(VARIANTS.items(), 35)},
    }
    with open(OUT, "w") as f:
        json.dump(fixture, f)


if __name__ == "__main__":
    main()
