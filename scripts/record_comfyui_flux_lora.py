"""Record how ComfyUI 0.10.0 (upstream commit 79cdbc81) merges Flux.1 LoRAs in diffusers' names (ai-toolkit's and
diffusers' `transformer.transformer_blocks.N.attn.to_q`, OneTrainer's `lora_transformer_`, SimpleTuner's `lycoris_`)
and in BFL's (kohya's `lora_unet_`, `diffusion_model.`, a single block's `linear1_qkv`) into flux-tiny's transformer,
as the fixture tests/models/fixtures/comfyui_flux_lora.json.xz.

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<sitecustomize shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_flux_lora.py <fixture> <models dir>

ComfyUI's detection takes Flux.1's RoPE axes whatever the width; this script gives the 32-wide tiny transformer
flux-tiny's axes (4, 4, 8) and changes nothing else: UNETLoader's load (comfy.sd.load_diffusion_model),
comfy.sd.load_lora_for_models (comfy/lora.py's Flux key map with comfy.utils.flux_to_diffusers, load_lora) and
ModelPatcher's patching are ComfyUI's. The seeded LoRA (recorded whole) covers q/k/v of both streams of the double
block, a single block's q/k/v and proj_mlp (rows of linear1), whole layers in each naming, and a linear1_qkv. Recorded
per strength: every patched weight."""

from __future__ import annotations

import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, sha256, write_json

OUT, MODELS = sys.argv[1:3]
comfyui_on_cpu()
import comfy.model_detection  # noqa: E402
import comfy.model_management  # noqa: E402
import comfy.sd  # noqa: E402

COMMIT = "79cdbc81"
TRANSFORMER = "diffusion_models/flux-tiny.safetensors"
STRENGTHS = [1.0, 0.6]
TINY_AXES = [4, 4, 8]
HIDDEN, MLP, RANK = 32, 128, 2
WEIGHT_VALUES = 1024  # each patched weight keeps a strided grid of at most this many values
# LoRA module name -> (rows, columns) of its difference
MODULES = {
    "transformer.transformer_blocks.0.attn.to_q": (HIDDEN, HIDDEN),
    "transformer.transformer_blocks.0.attn.to_v": (HIDDEN, HIDDEN),
    "transformer.transformer_blocks.0.attn.add_k_proj": (HIDDEN, HIDDEN),
    "transformer.transformer_blocks.0.ff.net.0.proj": (MLP, HIDDEN),
    "transformer.transformer_blocks.0.norm1_context.linear": (6 * HIDDEN, HIDDEN),
    "lora_transformer_single_transformer_blocks_0_attn_to_k": (HIDDEN, HIDDEN),
    "lycoris_single_transformer_blocks_1_proj_mlp": (MLP, HIDDEN),
    "transformer.single_transformer_blocks.1.proj_out": (HIDDEN, HIDDEN + MLP),
    "transformer.x_embedder": (HIDDEN, 64),
    "lora_unet_double_blocks_0_img_attn_proj": (HIDDEN, HIDDEN),
    "diffusion_model.single_blocks.0.linear1_qkv": (3 * HIDDEN, HIDDEN),
}


def tiny_detection() -> None:
    detect = comfy.model_detection.detect_unet_config

    def detect_tiny(state_dict, key_prefix, metadata=None):
        config = detect(state_dict, key_prefix, metadata=metadata)
        if config.get("image_model") == "flux" and config["hidden_size"] == HIDDEN:
            config.update(axes_dim=TINY_AXES, num_heads=HIDDEN // sum(TINY_AXES))
        return config

    comfy.model_detection.detect_unet_config = detect_tiny


def seeded_lora() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(21)
    lora = {}
    for i, (name, (rows, cols)) in enumerate(MODULES.items()):
        down, up = (".lora_A.weight", ".lora_B.weight") if i % 2 else (".lora_down.weight", ".lora_up.weight")
        lora[name + down] = 0.2 * torch.randn(RANK, cols, generator=gen)
        lora[name + up] = 0.2 * torch.randn(rows, RANK, generator=gen)
        if i % 3 == 0:
            lora[name + ".alpha"] = torch.tensor(float(i % 4 + 1))
    return lora


@torch.inference_mode()
def main() -> None:
    torch.set_num_threads(1)
    tiny_detection()
    model = comfy.sd.load_diffusion_model(f"{MODELS}/{TRANSFORMER}")
    original = {k: v.clone() for k, v in model.model.diffusion_model.state_dict().items()}
    lora = seeded_lora()
    record = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_flux_lora.py",
        "files": {TRANSFORMER: sha256(f"{MODELS}/{TRANSFORMER}")},
        "lora": {k: b64(v) for k, v in lora.items()},
        "cases": [],
    }
    for strength in STRENGTHS:
        patched, _ = comfy.sd.load_lora_for_models(model, None, lora, strength, 0)
        comfy.model_management.load_models_gpu([patched], force_full_load=True)
        weights = dict(patched.model.diffusion_model.state_dict())
        changed = sorted(k for k in weights if not torch.equal(weights[k], original[k]))
        record["cases"].append({"strength": strength, "patched": {k: b64(weights[k], WEIGHT_VALUES) for k in changed}})
        comfy.model_management.unload_all_models()
        print(strength, changed)
    print("wrote", write_json(OUT, record))


if __name__ == "__main__":
    main()
