"""Record what ComfyUI 0.3.64 computes for GLIGEN on the demo's tiny files, as the fixture of
tests/models/test_gligen.py: sd1-gligen-tiny's UNet evaluated with the GLIGEN layers of gligen-sd1-tiny for text boxes.

Run inside ComfyUI's own environment (it imports ComfyUI's modules and runs their code; nothing of ComfyUI is
copied here), given a models folder `comfy-cluster demo-models` wrote:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<shim>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_gligen.py <models> /work/main/tests/models/fixtures/comfyui_gligen.json

ComfyUI's model detection does not take sd1-gligen-tiny for SD1.5 (its widths are not the published ones), so its SD15
model config (comfy.supported_models) is built on the UNet config ComfyUI's detect_unet_config reads from the file;
the GLIGEN file is loaded by ComfyUI's own comfy.sd.load_gligen. Per case: the text boxes' pooled texts (seeded),
Gligen.set_position's middle patch for the latent's shape, and apply_model's denoised output at one sigma with that
patch (as ComfyUI's sampler passes it) and without. Tensors as float32 (base64).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys

import torch

MODELS, OUT = sys.argv[1], sys.argv[2]
sys.argv[1:] = ["--cpu"]  # ComfyUI reads its command line on import: no CUDA here
import comfy.cli_args  # noqa: E402

comfy.cli_args.args.cpu = True
COMFYUI = "0.3.64 (a125cd84)"
PREFIX = "model.diffusion_model."
# (name, boxes as (height, width, y, x) in latent cells, latent [h, w], batch, sigma)
CASES = [
    ("one_box", [(6, 4, 2, 1)], (8, 8), 1, 3.0),
    ("three_boxes", [(4, 4, 0, 0), (8, 2, 0, 6), (3, 5, 5, 3)], (8, 8), 1, 1.0),
    ("wide_latent_batch_of_two", [(8, 6, 0, 3)], (8, 12), 2, 6.0),
]


def b64(t: torch.Tensor) -> dict:
    t = t.detach().to(torch.float32).contiguous()
    return {"shape": list(t.shape), "f32": base64.b64encode(t.numpy().tobytes()).decode()}


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def main() -> None:
    import comfy.model_detection
    import comfy.sd
    import comfy.supported_models
    import comfy.utils

    ckpt = os.path.join(MODELS, "checkpoints", "sd1-gligen-tiny.safetensors")
    gligen_path = os.path.join(MODELS, "gligen", "gligen-sd1-tiny.safetensors")
    sd = comfy.utils.load_torch_file(ckpt)
    unet_config = comfy.model_detection.detect_unet_config(sd, PREFIX)
    model = comfy.supported_models.SD15(unet_config).get_model(sd, PREFIX, device=torch.device("cpu"))
    unet_sd = {k[len(PREFIX) :]: v.float() for k, v in sd.items() if k.startswith(PREFIX)}
    missing, unexpected = model.diffusion_model.load_state_dict(unet_sd, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    model.eval()
    gligen = comfy.sd.load_gligen(gligen_path).model.float()
    cases = []
    for i, (name, boxes, (h, w), batch, sigma) in enumerate(CASES):
        x = seeded(10 + i, batch, 4, h, w)
        context = seeded(20 + i, batch, 77, unet_config["context_dim"])
        pooled = [seeded(30 + i * 10 + j, 1, 64) for j in range(len(boxes))]
        params = [(p, *box) for p, box in zip(pooled, boxes)]
        patch = gligen.set_position(x.shape, params, torch.device("cpu"))
        with torch.no_grad():
            options = {"patches": {"middle_patch": [patch]}}
            denoised = model.apply_model(x, torch.tensor([sigma]), c_crossattn=context, transformer_options=options)
            plain = model.apply_model(x, torch.tensor([sigma]), c_crossattn=context, transformer_options={})
        cases.append(
            {
                "name": name,
                "boxes": [list(b) for b in boxes],
                "latent_hw": [h, w],
                "sigma": sigma,
                "x": b64(x),
                "context": b64(context),
                "pooled": [b64(p) for p in pooled],
                "denoised": b64(denoised),
                "without_gligen": b64(plain),
            }
        )

    def digest(path: str) -> str:
        return hashlib.sha256(open(path, "rb").read()).hexdigest()

    record = {
        "comfyui": COMFYUI,
        "recorded_by": "scripts/record_comfyui_gligen.py (comfy.model_base.BaseModel from SD15's model config on the "
        "detected tiny UNet, comfy.sd.load_gligen, Gligen.set_position as the middle patch, apply_model; CPU)",
        "sha256": {"sd1-gligen-tiny": digest(ckpt), "gligen-sd1-tiny": digest(gligen_path)},
        "cases": cases,
    }
    with open(OUT, "w") as f:
        json.dump(record, f, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
