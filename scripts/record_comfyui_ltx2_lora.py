"""Record what upstream ComfyUI 0.10.0 computes with ltx2-tiny's transformer and its tiny LoRA
(nodes/models/ltx2_demo.py: loras/ltx-2-19b-lora_tiny.safetensors, ComfyUI's LoRA key layout) for
tests/models/test_ltx2_lora.py (tests/models/fixtures/comfyui_ltx2_lora.json).

Run inside ComfyUI 0.10.0's own environment (commit 79cdbc81 of hiddenswitch/ComfyUI; it imports ComfyUI's
modules, nothing of ComfyUI is copied here; recipe in ../shared/reference/running-real-comfyui.md), after the demo
files were written (nodes.models.ltx2_demo.build_demo_ltx2):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_ltx2_lora.py <models dir> /work/main/tests/models/fixtures/comfyui_ltx2_lora.json

and, for the tiny LoRA in ID-LoRA's layout (the LTX-2.3 ID-LoRA template's), with its path as a third argument:

    ... record_comfyui_ltx2_lora.py <models dir> .../comfyui_ltx2_id_lora.json.xz loras/ltx-2.3-id-lora-talkvid-3k_tiny.safetensors

(an output named .json.xz is written xz-compressed, by scripts/comfyui_recording.write_json).

The checkpoint is loaded as UNETLoader loads it (comfy.sd.load_diffusion_model), the LoRA applied as
LoraLoaderModelOnly applies it (comfy.sd.load_lora_for_models at each strength), the patched weights loaded and one
evaluation (model_base.LTXAV.apply_model) recorded per strength on seeded latents.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys

import torch

CHECKPOINT = "checkpoints/ltx-2-19b-dev_tiny.safetensors"
LORA = "loras/ltx-2-19b-lora_tiny.safetensors"
STRENGTHS = [0.5, 1.0]
VIDEO, AUDIO_FRAMES, TOKENS, SIGMA, FRAME_RATE = (128, 2, 3, 4), 5, 4, 0.6, 24.0


def b64(t: torch.Tensor) -> dict:
    t = t.detach().float().contiguous().cpu()
    return {"shape": list(t.shape), "f32": base64.b64encode(t.numpy().tobytes()).decode()}


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main(models: str, out: str, lora_file: str = LORA) -> None:
    sys.argv = [sys.argv[0], "--cpu", "--use-pytorch-cross-attention"]
    import comfy.options

    comfy.options.enable_args_parsing()
    import comfy.model_management
    import comfy.sd
    import comfy.utils

    torch.set_num_threads(1)
    patcher = comfy.sd.load_diffusion_model(f"{models}/{CHECKPOINT}")
    lora = comfy.utils.load_torch_file(f"{models}/{lora_file}", safe_load=True)
    gen = torch.Generator().manual_seed(7)
    video = torch.randn((1, *VIDEO), generator=gen)
    audio = torch.randn((1, 8, AUDIO_FRAMES, 16), generator=gen)
    context = torch.randn((1, TOKENS, 2 * patcher.model.diffusion_model.caption_channels), generator=gen)
    record = {
        "sha256": {CHECKPOINT: sha256(f"{models}/{CHECKPOINT}"), lora_file: sha256(f"{models}/{lora_file}")},
        "video": b64(video),
        "audio": b64(audio),
        "context": b64(context),
        "sigma": SIGMA,
        "frame_rate": FRAME_RATE,
        "cases": [],
    }
    packed, shapes = comfy.utils.pack_latents([video, audio])
    for strength in STRENGTHS:
        patched, _ = comfy.sd.load_lora_for_models(patcher, None, lora, strength, 0)
        comfy.model_management.load_models_gpu([patched], force_full_load=True)
        with torch.no_grad():
            denoised = patched.model.apply_model(
                packed, torch.tensor([SIGMA]), c_crossattn=context, latent_shapes=shapes, frame_rate=FRAME_RATE
            )
        v_out, a_out = comfy.utils.unpack_latents(denoised, shapes)
        record["cases"].append({"strength": strength, "denoised_video": b64(v_out), "denoised_audio": b64(a_out)})
        comfy.model_management.unload_all_models()
        print(strength, float(v_out.abs().mean()), float(a_out.abs().mean()))
    if out.endswith(".json.xz"):
        from comfyui_recording import write_json  # this script's folder, first on sys.path

        write_json(out, record)
        return
    with open(out, "w") as f:
        json.dump(record, f)


if __name__ == "__main__":
    main(*sys.argv[1:4])
