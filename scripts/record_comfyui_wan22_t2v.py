"""Record what upstream ComfyUI 0.10.0 computes with wan-tiny's Wan 2.2 14B text-to-video experts
(diffusion_models/wan2.2_t2v_{high,low}_noise_14B_fp8_scaled_tiny.safetensors, ComfyUI's scaled fp8 layout;
nodes/models/wan_demo.py), as tests/models/fixtures/comfyui_wan22_t2v.json.

Run inside ComfyUI's own environment (its modules are imported; nothing of ComfyUI is copied here) after
nodes.models.wan_demo.build_demo_wan wrote the files:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_wan22_t2v.py /work/main/tests/models/fixtures/comfyui_wan22_t2v.json \\
        <models dir>

ComfyUI's UNETLoader loads each file (its model detection, its scaled fp8 handling, weight_dtype default); the
only change is the text width, which ComfyUI fixes at umt5-xxl's 4096 and the tiny file has at 32 (as in
scripts/record_comfyui_wan.py). Recorded: each expert's raw output on seeded inputs (odd sizes, a batch of two
timesteps). Tensors are float32 base64; the files' sha256 are stored so the test knows it has the same files.
"""

from __future__ import annotations

import json
import logging
import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, sha256

OUT, MODELS = sys.argv[1:3]
comfyui_on_cpu()
import comfy.model_detection
import folder_paths

import nodes

SOURCE = "ComfyUI 0.10.0 (hiddenswitch/ComfyUI 79cdbc81, upstream's commits)"
FILES = {
    "t2v_high": "diffusion_models/wan2.2_t2v_high_noise_14B_fp8_scaled_tiny.safetensors",
    "t2v_low": "diffusion_models/wan2.2_t2v_low_noise_14B_fp8_scaled_tiny.safetensors",
}
# (model, x shape, timesteps, context tokens)
CASES = [
    ("t2v_high", [1, 16, 2, 6, 5], [900.0], 512),
    ("t2v_low", [2, 16, 1, 4, 4], [400.0, 12.5], 512),
]


def tiny_text_width() -> None:
    detect = comfy.model_detection.detect_unet_config

    def detect_tiny(state_dict, key_prefix, metadata=None):
        cfg = detect(state_dict, key_prefix, metadata=metadata)
        if cfg is not None and cfg.get("image_model") == "wan2.1":
            cfg["text_dim"] = state_dict[f"{key_prefix}text_embedding.0.weight"].shape[1]
        return cfg

    comfy.model_detection.detect_unet_config = detect_tiny


def main() -> None:
    logging.getLogger().setLevel(logging.ERROR)
    torch.set_num_threads(1)
    tiny_text_width()
    folder_paths.add_model_folder_path("diffusion_models", f"{MODELS}/diffusion_models", is_default=True)
    out = []
    for k, (name, shape, steps, tokens) in enumerate(CASES):
        (patcher,) = nodes.UNETLoader().load_unet(FILES[name].split("/")[1], "default")
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(300 + k))
        context = torch.randn(shape[0], tokens, 32, generator=torch.Generator().manual_seed(400 + k))
        with torch.no_grad():
            y = patcher.model.diffusion_model(x, torch.tensor(steps), context)
        out.append({"model": name, "x": b64(x), "t": steps, "context": b64(context), "out": b64(y)})
    fixture = {
        "source": SOURCE,
        "recorded_by": "scripts/record_comfyui_wan22_t2v.py",
        "files": {k: {"path": v, "sha256": sha256(f"{MODELS}/{v}")} for k, v in FILES.items()},
        "transformer": out,
    }
    with open(OUT, "w") as f:
        json.dump(fixture, f)


if __name__ == "__main__":
    main()
