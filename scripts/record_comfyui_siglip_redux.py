"""Record ComfyUI's SigLIP vision encoding and Flux Redux conditioning for the tiny demo files, as a test fixture.

Run inside ComfyUI 0.3.64's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here):

    cd <ComfyUI source> && PYTHONPATH=<shim>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_siglip_redux.py <models> /work/main/tests/nodes/fixtures/comfyui_siglip_redux.json.xz

<models> is a models folder demo-models wrote (clip_vision/sigclip-vision-tiny.safetensors,
style_models/flux1-redux-dev-tiny.safetensors, nodes/models/redux_demo.py). ComfyUI tells SigLIP files by their
1152-wide layers and builds its Redux encoder at the released sizes, so its own classes are built here with the
demo's sizes: ClipVisionModel from its clip_vision_siglip_384 config with the tiny widths (TINY_SIGLIP_CONFIG,
written to a temporary JSON file) and ReduxImageEncoder(32 -> 32). Its preprocessing, forward pass and dtypes
(float16 weights, float32 compute) are ComfyUI's.

For each fixed image (`images()`; the test makes the same ones) and crop: clip_preprocess's SHA-256, and
encode_image's tensors, as strided samples (`sample`, STEPS). Then ComfyUI's StyleModelApply node with the Redux model
on the "wide" image's centre-cropped encoding, for each of REDUX_CASES on the fixed conditioning of
record_comfyui_style_model.conditioning (every REDUX_STEP-th value of each entry).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from comfyui_recording import b64, comfyui_on_cpu, sha256, write_json  # noqa: E402
from record_comfyui_clip_vision import digest  # noqa: E402
from record_comfyui_style_model import conditioning  # noqa: E402

TINY_SIGLIP_CONFIG = {
    "num_channels": 3,
    "hidden_act": "gelu_pytorch_tanh",
    "hidden_size": 32,
    "image_size": 384,
    "intermediate_size": 64,
    "model_type": "siglip_vision_model",
    "num_attention_heads": 16,
    "num_hidden_layers": 27,
    "patch_size": 14,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
}
STEPS = {"last_hidden_state": 23, "image_embeds": 23, "penultimate_hidden_states": 23, "all_hidden_states": 197}
REDUX_STEP = 3
# (name, strength, strength_type, entries of conditioning)
REDUX_CASES = [("multiply_1", 1.0, "multiply"), ("multiply_0_6", 0.6, "multiply"), ("two_entries", 1.3, "multiply")]
SIGLIP_FILE = "clip_vision/sigclip-vision-tiny.safetensors"
REDUX_FILE = "style_models/flux1-redux-dev-tiny.safetensors"
TEXT_WIDTH = 32


def images() -> dict[str, torch.Tensor]:
    """Fixed IMAGE batches [B,H,W,C] in 0..1 (shared with tests/nodes/test_siglip_redux.py)."""
    gen = torch.Generator().manual_seed(3840)
    return {
        "square_384": torch.rand(1, 384, 384, 3, generator=gen),
        "wide": torch.rand(1, 100, 150, 3, generator=gen),
        "batch_of_two_large": torch.rand(2, 420, 500, 3, generator=gen),
        "rgba": torch.rand(1, 64, 80, 4, generator=gen),
    }


def sample(t: torch.Tensor, step: int) -> dict:
    """Every `step`-th value of the flattened tensor, with the full shape."""
    return {"shape": list(t.shape), "step": step, "values": b64(t.detach().float().flatten()[::step])}


def main(models: str, out_path: str) -> None:
    comfyui_on_cpu()
    import comfy.clip_vision
    import comfy.ldm.flux.redux
    import comfy.sd
    import comfy.utils

    import nodes

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(TINY_SIGLIP_CONFIG, f)
    vision = comfy.clip_vision.ClipVisionModel(f.name)
    siglip_path = os.path.join(models, SIGLIP_FILE)
    missing, unexpected = vision.load_sd(comfy.utils.load_torch_file(siglip_path))
    assert not missing and not unexpected, (missing, unexpected)
    encodings = {}
    for name, image in images().items():
        for crop in ("center", "none"):
            pixels = comfy.clip_vision.clip_preprocess(
                image, size=384, mean=[0.5] * 3, std=[0.5] * 3, crop=crop == "center"
            )
            out = vision.encode_image(image, crop=crop == "center")
            encodings[f"{name}/{crop}"] = {
                "preprocessed": {"shape": list(pixels.shape), "sha256": digest(pixels)},
                **{key: sample(out[key], step) for key, step in STEPS.items()},
                "mm_projected": out["mm_projected"],
            }
    redux_path = os.path.join(models, REDUX_FILE)
    redux = comfy.ldm.flux.redux.ReduxImageEncoder(redux_dim=32, txt_in_features=TEXT_WIDTH)
    redux.load_state_dict(comfy.utils.load_torch_file(redux_path, safe_load=True))
    encoded = vision.encode_image(images()["wide"], crop=True)
    redux_cases = {}
    for name, strength, strength_type in REDUX_CASES:
        (out,) = nodes.StyleModelApply().apply_stylemodel(
            conditioning(name, TEXT_WIDTH), comfy.sd.StyleModel(redux), encoded, strength, strength_type
        )
        redux_cases[name] = [{"tensor": sample(t, REDUX_STEP), "keys": sorted(keys)} for t, keys in out]
    record = {
        "comfyui_commit": "a125cd84b054a57729b5eecab930ca9408719832",
        "recorded_by": "scripts/record_comfyui_siglip_redux.py (ComfyUI's clip_preprocess, ClipVisionModel with "
        "its SigLIP model type, ReduxImageEncoder and StyleModelApply node, CPU)",
        "siglip_sha256": sha256(siglip_path),
        "redux_sha256": sha256(redux_path),
        "encodings": encodings,
        "redux": redux_cases,
    }
    sorted_keys = json.loads(json.dumps(record, sort_keys=True))  # as this recorder has always written them
    write_json(out_path, sorted_keys)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
