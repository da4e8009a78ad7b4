"""Record what ComfyUI 0.3.64 computes for unCLIP on the demo's tiny files, as the fixture of
tests/models/test_unclip.py: SD2.1 unCLIP (sd21-unclip-tiny: its own image encoder, the noise-augmented image
embedding as the UNet's ADM input, one UNet evaluation) and SDXL revision (sdxl-revision-tiny with
clip-vision-g-tiny: the image embedding in SDXL's pooled slot).

Run inside ComfyUI's own environment (it imports ComfyUI's modules and runs their code; nothing of ComfyUI is
copied here), given a models folder `comfy-cluster demo-models` wrote:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<shim>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_unclip.py <models> /work/main/tests/models/fixtures/comfyui_unclip.json

ComfyUI picks CLIP vision configs and model configs by the published sizes, which the tiny files do not have, so its
own classes are built with the tiny sizes: ClipVisionModel from a config with the demo's sizes (the checkpoint's
`embedder.model.visual.` tower converted by ComfyUI's convert_to_transformers), and the model configs SD21UnclipH /
SDXL (comfy.supported_models) on the UNet config ComfyUI's detect_unet_config reads from the file, the unCLIP noise
augmentor as wide as the tiny image embedding (32; ViT-H's 1024 in SD21UnclipH). Per case: the CLIP vision image
embeddings, encode_adm's ADM for the case's unclip_conditioning and seed, and apply_model's denoised output at one
sigma. Tensors as float32 (base64).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import torch
from comfyui_recording import b64, comfyui_on_cpu, sha256

MODELS, OUT = sys.argv[1], sys.argv[2]
comfyui_on_cpu()
COMFYUI = "0.3.64 (a125cd84)"
PREFIX = "model.diffusion_model."
VISION = {  # the demo's tiny CLIP vision towers (nodes/models/unclip_demo.py)
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
}
# (name, [(image, strength, noise_augmentation), ...] one per unCLIPConditioning, seed, latent [h, w], sigma)
SD21_CASES = [
    ("no_image", [], 5, (8, 8), 3.0),
    ("one_image", [("a", 1.0, 0.0)], 5, (8, 8), 3.0),
    ("strength_and_noise", [("a", 0.7, 0.25)], 123, (8, 8), 1.2),
    ("two_nodes_merged", [("a", 1.0, 0.1), ("b", 0.5, 0.0)], 42, (8, 8), 6.0),
    ("batch_of_two_in_one_node", [("ab", 1.3, 0.5)], 7, (8, 8), 0.5),
]
SDXL_CASES = [
    ("revision_one_image", [("a", 1.0, 0.0)], 11, (8, 8), 2.0),
    ("revision_template", [("a", 0.75, 0.0), ("b", 0.75, 0.0)], 900749379955168, (8, 8), 4.0),
    ("revision_noise", [("b", 1.5, 0.4)], 3, (8, 8), 1.0),
]


def images() -> dict[str, torch.Tensor]:
    """Fixed IMAGE batches (the test makes the same ones)."""
    gen = torch.Generator().manual_seed(2024)
    a, b = torch.rand(1, 96, 80, 3, generator=gen), torch.rand(1, 64, 128, 3, generator=gen)
    return {"a": a, "b": b, "ab": torch.cat([a[:, :64, :80], b[:, :, :80]])}


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def vision(sd: dict, prefix: str, projection_dim: int):
    import comfy.clip_vision

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({**VISION, "projection_dim": projection_dim}, f)
    model = comfy.clip_vision.ClipVisionModel(f.name)
    sd = comfy.clip_vision.convert_to_transformers(sd, prefix) if prefix else sd
    missing, _ = model.load_sd(sd)
    assert not missing, missing
    return model


def model_of(config_class, sd: dict, **overrides):
    import comfy.model_detection

    unet_config = comfy.model_detection.detect_unet_config(sd, PREFIX)
    config = config_class(unet_config)
    for k, v in overrides.items():
        setattr(config, k, v)
    model = config.get_model(sd, PREFIX, device=torch.device("cpu"))
    unet_sd = {k[len(PREFIX) :]: v.float() for k, v in sd.items() if k.startswith(PREFIX)}
    missing, unexpected = model.diffusion_model.load_state_dict(unet_sd, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    return model.eval(), unet_config


def run(model, unet_config, encoder, cases, extra: dict) -> list[dict]:
    encoded = {name: encoder.encode_image(image, crop=True) for name, image in images().items()}
    out = []
    for i, (name, chain, seed, (h, w), sigma) in enumerate(cases):
        x, context = seeded(40 + i, 1, 4, h, w), seeded(50 + i, 1, 77, unet_config["context_dim"])
        unclip = [{"clip_vision_output": encoded[img], "strength": s, "noise_augmentation": a} for img, s, a in chain]
        kwargs = {"device": torch.device("cpu"), "seed": seed, "width": w * 8, "height": h * 8, **extra}
        if unclip:
            kwargs["unclip_conditioning"] = unclip
        with torch.no_grad():
            adm = model.encode_adm(**kwargs)
            denoised = model.apply_model(x, torch.tensor([sigma]), c_crossattn=context, y=adm)
        out.append(
            {
                "name": name,
                "chain": [list(c) for c in chain],
                "seed": seed,
                "latent_hw": [h, w],
                "sigma": sigma,
                "x": b64(x),
                "context": b64(context),
                "image_embeds": {img: b64(encoded[img]["image_embeds"]) for img, _, _ in chain},
                "adm": b64(adm),
                "denoised": b64(denoised),
            }
        )
    return out


def main() -> None:
    import comfy.supported_models
    import comfy.utils

    sd21_path = os.path.join(MODELS, "checkpoints", "sd21-unclip-tiny.safetensors")
    sd21 = comfy.utils.load_torch_file(sd21_path)
    noise_aug = {"noise_schedule_config": {"timesteps": 1000, "beta_schedule": "squaredcos_cap_v2"}, "timestep_dim": 32}
    model, unet_config = model_of(comfy.supported_models.SD21UnclipH, sd21, noise_aug_config=noise_aug)
    sd21_cases = run(model, unet_config, vision(sd21, "embedder.model.visual.", 32), SD21_CASES, {})

    xl_path = os.path.join(MODELS, "checkpoints", "sdxl-revision-tiny.safetensors")
    g_path = os.path.join(MODELS, "clip_vision", "clip-vision-g-tiny.safetensors")
    xl = comfy.utils.load_torch_file(xl_path)
    model, xl_config = model_of(comfy.supported_models.SDXL, xl)
    pooled = {"pooled_output": seeded(60, 1, 1280)}  # replaced by the image embedding, as ComfyUI's sdxl_pooled does
    xl_cases = run(model, xl_config, vision(comfy.utils.load_torch_file(g_path), "", 1280), SDXL_CASES, pooled)

    record = {
        "comfyui": COMFYUI,
        "recorded_by": "scripts/record_comfyui_unclip.py (comfy.clip_vision.ClipVisionModel with the tiny sizes; "
        "comfy.model_base.SD21UNCLIP / SDXL from SD21UnclipH / SDXL's model configs on the detected tiny UNets: "
        "encode_adm, apply_model; CPU)",
        "sha256": {
            p: sha256(os.path.join(MODELS, p))
            for p in (
                "checkpoints/sd21-unclip-tiny.safetensors",
                "checkpoints/sdxl-revision-tiny.safetensors",
                "clip_vision/clip-vision-g-tiny.safetensors",
            )
        },
        "sd21_unet_config": {k: unet_config[k] for k in ("context_dim", "adm_in_channels")},
        "sd21": sd21_cases,
        "sdxl_pooled": b64(pooled["pooled_output"]),
        "sdxl": xl_cases,
    }
    with open(OUT, "w") as f:
        json.dump(record, f, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
