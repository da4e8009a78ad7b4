"""Record how ComfyUI 0.10.0 (upstream commit 79cdbc81) applies Z-Image LoRAs, on z-image-turbo-tiny and its three
tiny LoRAs (nodes/models/zimage_demo.py's LORA_FILES: ai-toolkit's, ComfyUI's own and diffusers'/SimpleTuner's
layouts), as the fixture tests/models/fixtures/comfyui_zimage_lora.json.xz.

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<sitecustomize shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_zimage_lora.py <fixture> <models dir>

ComfyUI's model detection sizes a NextDiT only for the released widths (3840 for Z-Image, 2304 for Lumina 2); this
script gives the tiny width the Z-Image branch's settings with the heads, refiners and widths read from the file
and changes nothing else: UNETLoader's load (comfy.sd.load_diffusion_model), the LoraLoaderModelOnly node (its key
map, comfy/lora.py model_lora_keys_unet with comfy.utils.z_image_to_diffusers, load_lora, the weight adapters) and
ModelPatcher's patching are ComfyUI's. Recorded per case (a chain of (LoRA, strength)): every patched weight (thinned)
and the NextDiT's output for a seeded latent at one sigma."""

from __future__ import annotations

import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, node_classes, run_node, sha256, write_json

OUT, MODELS = sys.argv[1:3]
comfyui_on_cpu()
import comfy.model_detection  # noqa: E402
import comfy.model_management  # noqa: E402
import comfy.sd  # noqa: E402
import folder_paths  # noqa: E402

COMMIT = "79cdbc81"
TRANSFORMER = "diffusion_models/z-image-turbo-tiny.safetensors"
LORAS = {
    "ai_toolkit": "loras/z_image_turbo_lora_tiny.safetensors",
    "comfyui": "loras/z_image_turbo_lora_tiny_comfyui.safetensors",
    "diffusers": "loras/z_image_turbo_lora_tiny_diffusers.safetensors",
}
CASES = {
    "ai_toolkit": [("ai_toolkit", 0.8)],
    "comfyui": [("comfyui", 1.0)],
    "diffusers": [("diffusers", -0.6)],
    "chained": [("ai_toolkit", 0.5), ("comfyui", 0.7), ("diffusers", 1.2)],
}
HEAD = 128
WEIGHT_VALUES = 512  # each patched weight keeps a strided grid of at most this many values
SEED, LATENT, TOKENS, SIGMA = 3, (1, 16, 8, 8), 7, 0.6


def tiny_detection() -> None:
    """The Z-Image branch of ComfyUI's detection for the tiny width: heads of 128, the file's refiner depth."""
    detect = comfy.model_detection.detect_unet_config

    def detect_tiny(state_dict, key_prefix, metadata=None):
        config = detect(state_dict, key_prefix, metadata=metadata)
        if config.get("image_model") == "lumina2" and config["dim"] not in (2304, 3840):
            refiners = {k.split(".")[1] for k in state_dict if k.startswith(f"{key_prefix}noise_refiner.")}
            config.update(
                n_heads=config["dim"] // HEAD,
                n_kv_heads=config["dim"] // HEAD,
                n_refiner_layers=len(refiners),
                axes_dims=[32, 48, 48],
                axes_lens=[1536, 512, 512],
                rope_theta=256.0,
                ffn_dim_multiplier=8.0 / 3.0,
                z_image_modulation=True,
                time_scale=1000.0,
            )
            if f"{key_prefix}cap_pad_token" in state_dict:
                config["pad_tokens_multiple"] = 32
        return config

    comfy.model_detection.detect_unet_config = detect_tiny


@torch.inference_mode()  # as ComfyUI's executor runs nodes
def record_case(model, chain: list, classes: dict, original: dict) -> dict:
    patched = model
    for layout, strength in chain:
        (patched,) = run_node(
            classes["LoraLoaderModelOnly"],
            {"model": patched, "lora_name": LORAS[layout].split("/", 1)[1], "strength_model": strength},
        )
    comfy.model_management.load_models_gpu([patched], force_full_load=True)
    net = patched.model.diffusion_model
    weights = {k: v for k, v in net.state_dict().items()}
    keys = sorted(k[len("diffusion_model.") :] for k in patched.patches)
    gen = torch.Generator().manual_seed(SEED)
    x = torch.randn(LATENT, generator=gen)
    context = torch.randn((1, TOKENS, net.cap_embedder[1].weight.shape[1]), generator=gen)
    out = net(x, torch.tensor([SIGMA]), context, num_tokens=TOKENS)
    comfy.model_management.unload_all_models()
    for k in keys:
        assert not torch.equal(weights[k], original[k]), f"{k} was not patched"
    print(chain, len(keys), float(out.abs().mean()))
    return {
        "chain": [[layout, strength] for layout, strength in chain],
        "patched": {k: b64(weights[k], WEIGHT_VALUES) for k in keys},
        "output": b64(out),
    }


def main() -> None:
    torch.set_num_threads(1)
    tiny_detection()
    folder_paths.add_model_folder_path("loras", f"{MODELS}/loras", is_default=True)
    model = comfy.sd.load_diffusion_model(f"{MODELS}/{TRANSFORMER}")
    original = {k: v.clone() for k, v in model.model.diffusion_model.state_dict().items()}
    classes = node_classes()
    gen = torch.Generator().manual_seed(SEED)
    x = torch.randn(LATENT, generator=gen)
    context = torch.randn((1, TOKENS, original["cap_embedder.1.weight"].shape[1]), generator=gen)
    with torch.inference_mode():
        plain = model.model.diffusion_model(x, torch.tensor([SIGMA]), context, num_tokens=TOKENS)
    record = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_zimage_lora.py",
        "files": {p: sha256(f"{MODELS}/{p}") for p in (TRANSFORMER, *LORAS.values())},
        "inputs": {"seed": SEED, "latent": list(LATENT), "tokens": TOKENS, "sigma": SIGMA},
        "x": b64(x),
        "context": b64(context),
        "plain": b64(plain),
        "cases": {name: record_case(model, chain, classes, original) for name, chain in CASES.items()},
    }
    print("wrote", write_json(OUT, record))


if __name__ == "__main__":
    main()
