"""Record one evaluation of ComfyUI 0.10.0's FLUX.2 model on the demo's tiny FLUX.2 dev transformer (with dev's
guidance embedder), as a fixture of tests/models/test_flux2_dev.py.

Run inside ComfyUI's own environment (it imports ComfyUI's modules and runs their code; nothing of ComfyUI
is copied here), given the demo models (`comfy-cluster demo-models` builds them):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_flux2_dev_transformer.py \\
        <models>/diffusion_models/flux2-dev-tiny.safetensors /work/main/tests/models/fixtures/comfyui_flux2_dev.json

ComfyUI's own detection (comfy.model_detection.detect_unet_config) reads the file; its Flux2 model config
(comfy.supported_models) builds comfy.model_base.Flux2 with the file's weights. Per case: extra_conds (the
context left-padded to 512 tokens, the guidance) and apply_model's denoised output at one sigma, on seeded
tensors. Tensors as float32 (base64).
"""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, sha256

WEIGHTS, OUT = sys.argv[1], sys.argv[2]
comfyui_on_cpu()

COMFYUI = "0.10.0 (79cdbc81)"
CASES = [("guidance_4", (1, 128, 4, 6), 9, 0.7, 4.0), ("guidance_2_5_batch_2", (2, 128, 3, 5), 20, 0.3, 2.5)]


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def main() -> None:
    import comfy.model_base
    import comfy.model_detection
    import comfy.supported_models
    import comfy.utils

    sd = comfy.utils.load_torch_file(WEIGHTS)
    unet_config = comfy.model_detection.detect_unet_config(sd, "")
    model = comfy.model_base.Flux2(comfy.supported_models.Flux2(unet_config), device=torch.device("cpu"))
    missing, unexpected = model.diffusion_model.load_state_dict(sd, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    model.eval()
    cases = []
    for i, (name, shape, tokens, sigma, guidance) in enumerate(CASES):
        x = seeded(10 + i, *shape)
        context = seeded(20 + i, shape[0], tokens, unet_config["context_in_dim"])
        conds = model.extra_conds(
            cross_attn=context, pooled_output=None, guidance=guidance, noise=x, device=torch.device("cpu")
        )
        kwargs = {k: v.cond for k, v in conds.items()}
        with torch.no_grad():
            denoised = model.apply_model(x, torch.full((shape[0],), sigma), **kwargs)
        cases.append(
            {"name": name, "x": b64(x), "context": b64(context), "sigma": sigma, "guidance": guidance}
            | {"denoised": b64(denoised)}
        )
    record = {
        "comfyui": COMFYUI,
        "recorded_by": "scripts/record_comfyui_flux2_dev_transformer.py (comfy.model_base.Flux2 from ComfyUI's "
        "detection of the tiny dev file: extra_conds, apply_model; CPU)",
        "guidance_embed": bool(unet_config.get("guidance_embed")),
        "weights_sha256": sha256(WEIGHTS),
        "cases": cases,
    }
    with open(OUT, "w") as f:
        json.dump(record, f, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
