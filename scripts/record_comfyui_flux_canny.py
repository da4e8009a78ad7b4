"""Record what ComfyUI computes for FLUX.1 Canny / Depth dev (the latent joined by the control image's latent, what
InstructPixToPixConditioning's concat_latent_image becomes) on the demo's tiny Canny transformer, as the fixture
of tests/models/test_flux_canny.py.

Run inside ComfyUI's own environment (it imports ComfyUI's modules and runs their code; nothing of ComfyUI
is copied here), given the demo models (`comfy-cluster demo-models` builds them):

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<shim>:/work/main/scripts:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_flux_canny.py <models>/diffusion_models/flux-canny-tiny.safetensors \\
        /work/main/tests/models/fixtures/comfyui_flux_canny.json

ComfyUI's own Flux model config (comfy.supported_models.Flux: its detection gives in_channels 32, img_in's width
over the 2x2 patch, which no Flux variant but the plain one matches) with the tiny file's sizes (ComfyUI's
detection derives the head count from Flux.1's real RoPE axes, so the sizes are given here, as
record_comfyui_flux_fill.py does) builds comfy.model_base.Flux; its weights are the file's. For each case: the
model's concat_cond and apply_model's denoised output at one sigma with that concat, on seeded tensors.
Tensors are stored as float32 (base64).
"""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import MAX_RECORDED_VALUES, b64, comfyui_on_cpu, sha256

WEIGHTS, OUT = sys.argv[1], sys.argv[2]
comfyui_on_cpu()

COMFYUI = "0.3.64 (a125cd84)"
TINY = {  # flux-tiny's sizes (nodes/models/configs/flux-tiny) with Canny / Depth's 32 input channels
    "image_model": "flux",
    "guidance_embed": True,
    "in_channels": 32,
    "out_channels": 16,
    "vec_in_dim": 32,
    "context_in_dim": 32,
    "hidden_size": 32,
    "mlp_ratio": 4.0,
    "num_heads": 2,
    "depth": 1,
    "depth_single_blocks": 2,
    "axes_dim": [4, 4, 8],
    "theta": 10000,
    "patch_size": 2,
    "qkv_bias": True,
}
# (name, latent shape, control image latent shape or None)
CASES = [
    ("same_size", (1, 16, 6, 8), (1, 16, 6, 8)),
    ("batch_2_other_size", (2, 16, 6, 8), (1, 16, 5, 7)),
    ("odd_latent", (1, 16, 5, 7), (1, 16, 5, 7)),
    ("no_image", (1, 16, 4, 6), None),
]


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def main() -> None:
    import comfy.model_base
    import comfy.supported_models
    import comfy.utils

    config = comfy.supported_models.Flux(TINY)
    model = comfy.model_base.Flux(config, device=torch.device("cpu"))
    missing, unexpected = model.diffusion_model.load_state_dict(comfy.utils.load_torch_file(WEIGHTS), strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    model.eval()
    cases = []
    for i, (name, shape, image_shape) in enumerate(CASES):
        x = seeded(100 + i, *shape)
        image = None if image_shape is None else seeded(200 + i, *image_shape)
        context, y = seeded(400 + i, shape[0], 5, 32), seeded(500 + i, shape[0], 32)
        sigma, guidance = 0.6, 30.0
        kwargs = {"noise": x, "device": torch.device("cpu")}
        if image is not None:
            kwargs["concat_latent_image"] = image
        with torch.no_grad():
            concat = model.concat_cond(**kwargs)
            denoised = model.apply_model(
                x,
                torch.full((shape[0],), sigma),
                c_concat=concat,
                c_crossattn=context,
                y=y,
                guidance=torch.full((shape[0],), guidance),
            )
        case = {"name": name, "x": b64(x), "context": b64(context), "y": b64(y), "sigma": sigma, "guidance": guidance}
        case |= {"concat": b64(concat, MAX_RECORDED_VALUES), "denoised": b64(denoised, MAX_RECORDED_VALUES)}
        if image is not None:
            case["image"] = b64(image)
        cases.append(case)
    record = {
        "comfyui": COMFYUI,
        "recorded_by": "scripts/record_comfyui_flux_canny.py (comfy.model_base.Flux with Flux's config at "
        "in_channels 32: concat_cond, apply_model; CPU)",
        "weights_sha256": sha256(WEIGHTS),
        "cases": cases,
    }
    with open(OUT, "w") as f:
        json.dump(record, f, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
