"""Record what ComfyUI computes for the SDXL refiner (its ADM: CLIP-G's pooled output, then height, width, crops and
the aesthetic score, defaulting by prompt type; one evaluation of its UNet) on the demo's tiny refiner checkpoint,
as the fixture of tests/models/test_sdxl_refiner.py.

Run inside ComfyUI's own environment (it imports ComfyUI's modules and runs their code; nothing of ComfyUI
is copied here), given the demo models (`comfy-cluster demo-models` builds them):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_sdxl_refiner.py <models>/checkpoints/sdxl-refiner-tiny.safetensors \\
        /work/main/tests/models/fixtures/comfyui_sdxl_refiner.json

ComfyUI's own UNet detection (comfy.model_detection.detect_unet_config) reads the tiny file's UNet; its sizes are
not the published refiner's, so ComfyUI's SDXLRefiner model config (comfy.supported_models) is built with the
detected UNet config and makes comfy.model_base.SDXLRefiner, loaded with the file's weights. Per case: the
model's encode_adm for the entry's options and prompt type (width / height default to the latent's pixels, as
encode_model_conds sets them) and apply_model's denoised output at one sigma. Tensors as float32 (base64).
"""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, sha256

WEIGHTS, OUT = sys.argv[1], sys.argv[2]
comfyui_on_cpu()

COMFYUI = "0.10.0 (79cdbc81)"
PREFIX = "model.diffusion_model."
# (name, prompt type, entry options, latent [h, w], sigma)
CASES = [
    ("positive_defaults", "positive", {}, (8, 8), 2.5),
    ("negative_defaults", "negative", {}, (8, 8), 2.5),
    ("refiner_node_positive", "positive", {"aesthetic_score": 7.5, "width": 1024, "height": 768}, (6, 10), 0.8),
    ("refiner_node_negative", "negative", {"aesthetic_score": 3.0, "width": 2048, "height": 2048}, (8, 8), 9.0),
    ("crops", "positive", {"crop_w": 64, "crop_h": 32, "width": 640, "height": 512}, (8, 8), 1.5),
]


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def main() -> None:
    import comfy.model_base
    import comfy.model_detection
    import comfy.supported_models
    import comfy.utils

    sd = comfy.utils.load_torch_file(WEIGHTS)
    unet_config = comfy.model_detection.detect_unet_config(sd, PREFIX)
    config = comfy.supported_models.SDXLRefiner(unet_config)
    model = comfy.model_base.SDXLRefiner(config, device=torch.device("cpu"))
    unet_sd = {k[len(PREFIX) :]: v.float() for k, v in sd.items() if k.startswith(PREFIX)}
    missing, unexpected = model.diffusion_model.load_state_dict(unet_sd, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    model.eval()
    context_dim, adm_in = unet_config["context_dim"], unet_config["adm_in_channels"]
    pooled_dim = adm_in - 5 * 256
    cases = []
    for i, (name, prompt_type, opts, (h, w), sigma) in enumerate(CASES):
        x = seeded(10 + i, 1, 4, h, w)
        context, pooled = seeded(20 + i, 1, 77, context_dim), seeded(30 + i, 1, pooled_dim)
        kwargs = {"pooled_output": pooled, "width": w * 8, "height": h * 8, "prompt_type": prompt_type, **opts}
        with torch.no_grad():
            adm = model.encode_adm(**kwargs)
            denoised = model.apply_model(x, torch.tensor([sigma]), c_crossattn=context, y=adm)
        cases.append(
            {
                "name": name,
                "prompt_type": prompt_type,
                "options": opts,
                "latent_hw": [h, w],
                "sigma": sigma,
                "x": b64(x),
                "context": b64(context),
                "pooled": b64(pooled),
                "adm": b64(adm),
                "denoised": b64(denoised),
            }
        )
    record = {
        "comfyui": COMFYUI,
        "recorded_by": "scripts/record_comfyui_sdxl_refiner.py (comfy.model_base.SDXLRefiner with SDXLRefiner's "
        "model config on the detected tiny UNet: encode_adm, apply_model; CPU)",
        "unet_config": {k: v for k, v in unet_config.items() if k in ("context_dim", "adm_in_channels")},
        "weights_sha256": sha256(WEIGHTS),
        "cases": cases,
    }
    with open(OUT, "w") as f:
        json.dump(record, f, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
