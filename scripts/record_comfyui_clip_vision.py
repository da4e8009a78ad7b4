"""Record ComfyUI's CLIP vision preprocessing and encoding for the demo CLIP vision model, as a test fixture.

Run inside ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here):

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_clip_vision.py <models>/clip_vision/clip-vision-tiny.safetensors \\
        /work/main/tests/nodes/fixtures/comfyui_clip_vision.json

ComfyUI picks a CLIP vision config by depth and refuses a two-layer model, so the demo file is loaded into
ComfyUI's ClipVisionModel built from a config with the demo's sizes (written to a temporary JSON file); the
forward pass, dtype handling (float16 weights, float32 compute) and preprocessing are ComfyUI's.
For each fixed image (`images()` below; the test makes the same ones) and crop mode it stores the SHA-256 of
clip_preprocess's float32 output with its mean, and encode_image's outputs: image_embeds in full, the hidden
states as every 64th value with their shape and mean.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile

import torch
from comfyui_recording import sha256

TINY_CONFIG = {
    "hidden_act": "quick_gelu",
    "hidden_size": 32,
    "image_size": 224,
    "intermediate_size": 64,
    "layer_norm_eps": 1e-05,
    "model_type": "clip_vision_model",
    "num_attention_heads": 16,
    "num_channels": 3,
    "num_hidden_layers": 2,
    "patch_size": 14,
    "projection_dim": 32,
}


def images() -> dict[str, torch.Tensor]:
    """Fixed IMAGE batches [B,H,W,C] in 0..1 (shared with tests/nodes/test_clip_vision.py)."""
    gen = torch.Generator().manual_seed(4321)
    return {
        "square_224": torch.rand(1, 224, 224, 3, generator=gen),
        "wide": torch.rand(1, 100, 150, 3, generator=gen),
        "tall_small": torch.rand(1, 50, 30, 3, generator=gen),
        "batch_of_two_large": torch.rand(2, 300, 260, 3, generator=gen),
        "rgba": torch.rand(1, 64, 80, 4, generator=gen),
    }


def digest(t: torch.Tensor) -> str:
    return hashlib.sha256(t.detach().to(torch.float32).contiguous().numpy().tobytes()).hexdigest()


def sample(t: torch.Tensor) -> dict:
    t = t.detach().to(torch.float32)
    return {"shape": list(t.shape), "mean": float(t.mean()), "every_64th": t.flatten()[::64].tolist()}


def main(model_path: str, out_path: str) -> None:
    from comfy.cli_args import args

    args.cpu = True  # as the server runs with --cpu; must be set before model_management is imported
    import comfy.clip_vision
    import comfy.utils

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(TINY_CONFIG, f)
    model = comfy.clip_vision.ClipVisionModel(f.name)
    missing, unexpected = model.load_sd(comfy.utils.load_torch_file(model_path))
    assert not missing and not unexpected, (missing, unexpected)
    cases = {}
    for name, image in images().items():
        for crop in ("center", "none"):
            pixels = comfy.clip_vision.clip_preprocess(image, size=224, crop=crop == "center")
            out = model.encode_image(image, crop=crop == "center")
            cases[f"{name}/{crop}"] = {
                "preprocessed": {"shape": list(pixels.shape), "sha256": digest(pixels), "mean": float(pixels.mean())},
                "image_embeds": out["image_embeds"].float().tolist(),
                "last_hidden_state": sample(out["last_hidden_state"]),
                "penultimate_hidden_states": sample(out["penultimate_hidden_states"]),
                "mm_projected": out["mm_projected"],
            }
    record = {
        "comfyui_commit": "a125cd84b054a57729b5eecab930ca9408719832",
        "recorded_by": "scripts/record_comfyui_clip_vision.py (ComfyUI's clip_preprocess and "
        "ClipVisionModel.encode_image, CPU)",
        "model_sha256": sha256(model_path),
        "cases": cases,
    }
    with open(out_path, "w") as f:
        json.dump(record, f, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
