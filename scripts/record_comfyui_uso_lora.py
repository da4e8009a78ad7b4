"""Record how ComfyUI 0.10.0 (upstream commit 79cdbc81) applies USO's DiT LoRA to FLUX.1, on the tiny files of
nodes/models/uso_demo.py (checkpoints/flux1-dev-uso-tiny.safetensors: flux-tiny's width at the released depth, which
ComfyUI's USO test reads; loras/uso-flux1-dit-lora-v1-tiny.safetensors in the released file's layout), as the fixture
tests/models/fixtures/comfyui_uso_lora.json.xz.

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<sitecustomize shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_uso_lora.py <fixture> <models dir>

ComfyUI's model detection takes Flux.1's RoPE axes (16, 56, 56) whatever the width; this script gives the 32-wide
tiny transformer flux-tiny's axes (4, 4, 8), so 2 heads, and changes nothing else: UNETLoader's load of the
checkpoint's transformer (comfy.sd.load_diffusion_model), LoraLoaderModelOnly (comfy/lora_convert.py's USO renaming,
comfy/lora.py's Flux key map with linear1_qkv, load_lora, the LoRA adapter) and ModelPatcher's patching are
ComfyUI's. Recorded per strength: the names of every patched weight, the patched values of the first and last
blocks' (thinned), and the Flux model's output for seeded inputs (as scripts/record_comfyui_uso.py's)."""

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
CHECKPOINT = "checkpoints/flux1-dev-uso-tiny.safetensors"
LORA = "loras/uso-flux1-dit-lora-v1-tiny.safetensors"
STRENGTHS = [1.0, 0.7]
TINY_AXES = [4, 4, 8]  # flux-tiny's (nodes/models/configs/flux-tiny/flux.json)
WEIGHT_VALUES = 256
RECORDED_BLOCKS = ("double_blocks.0.", "double_blocks.18.", "single_blocks.0.", "single_blocks.37.")
SIGMA, GUIDANCE = 0.7, 3.5


def tiny_detection() -> None:
    detect = comfy.model_detection.detect_unet_config

    def detect_tiny(state_dict, key_prefix, metadata=None):
        config = detect(state_dict, key_prefix, metadata=metadata)
        if config.get("image_model") == "flux" and config["hidden_size"] == 32:
            config.update(axes_dim=TINY_AXES, num_heads=32 // sum(TINY_AXES))
        return config

    comfy.model_detection.detect_unet_config = detect_tiny


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@torch.inference_mode()  # as ComfyUI's executor runs nodes
def main() -> None:
    torch.set_num_threads(1)
    tiny_detection()
    folder_paths.add_model_folder_path("loras", f"{MODELS}/loras", is_default=True)
    model = comfy.sd.load_diffusion_model(f"{MODELS}/{CHECKPOINT}")
    net = model.model.diffusion_model
    original = {k: v.clone() for k, v in net.state_dict().items()}
    x, context, y = seeded(40, 1, 16, 6, 8), seeded(41, 1, 5, 32), seeded(42, 1, 32)
    t, guidance = torch.tensor([SIGMA]), torch.tensor([GUIDANCE])
    record = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_uso_lora.py",
        "files": {p: sha256(f"{MODELS}/{p}") for p in (CHECKPOINT, LORA)},
        "sigma": SIGMA,
        "guidance": GUIDANCE,
        "x": b64(x),
        "context": b64(context),
        "y": b64(y),
        "plain": b64(net(x, t, context, y, guidance)),
        "cases": [],
    }
    classes = node_classes()
    for strength in STRENGTHS:
        (patched,) = run_node(
            classes["LoraLoaderModelOnly"],
            {"model": model, "lora_name": LORA.split("/", 1)[1], "strength_model": strength},
        )
        comfy.model_management.load_models_gpu([patched], force_full_load=True)
        weights = dict(patched.model.diffusion_model.state_dict())
        keys = sorted(k[len("diffusion_model.") :] for k in patched.patches)
        changed = sorted(k for k in weights if not torch.equal(weights[k], original[k]))
        out = patched.model.diffusion_model(x, t, context, y, guidance)
        comfy.model_management.unload_all_models()
        print(strength, len(keys), len(changed), float(out.abs().mean()))
        record["cases"].append(
            {
                "strength": strength,
                "patched_keys": keys,
                "changed_keys": changed,
                "patched": {k: b64(weights[k], WEIGHT_VALUES) for k in keys if k.startswith(RECORDED_BLOCKS)},
                "output": b64(out),
            }
        )
    print("wrote", write_json(OUT, record))


if __name__ == "__main__":
    main()
