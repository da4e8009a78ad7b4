"""Record what upstream ComfyUI 0.10.0 computes with ltx2-tiny's audio-video transformer (nodes/models/ltx2_demo.py),
as the fixture tests/models/test_ltx2.py compares with (tests/models/fixtures/comfyui_ltx2.json).

Run inside ComfyUI 0.10.0's own environment (commit 79cdbc81 of hiddenswitch/ComfyUI; it imports ComfyUI's
modules, nothing of ComfyUI is copied here; recipe in ../shared/reference/running-real-comfyui.md), after the
tiny checkpoint was written (nodes.models.ltx2_demo.build_demo_ltx2):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_ltx2.py <models dir> /work/main/tests/models/fixtures/comfyui_ltx2.json

The checkpoint is loaded as UNETLoader loads it (comfy.sd.load_diffusion_model: the model detected from its keys
and its metadata's transformer config) and evaluated through ComfyUI's own BaseModel (model_base.LTXAV: its
model sampling, its packing of the video and audio latents into one tensor, its per-token timesteps from a
noise mask). Recorded per case: the seeded inputs, the denoised video and audio latents of one evaluation, and
the model's detected facts. The checkpoint's video VAE is loaded as CheckpointLoaderSimple loads it
(comfy.sd.load_checkpoint_guess_config) and recorded encoding seeded frames (odd sizes: ComfyUI's centre crop to
multiples of 32) and decoding seeded latents (a batch of two). Tensors are float32 base64; the file's sha256 is stored so the test knows it has
the same file.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys

import torch

FILE = "checkpoints/ltx-2-19b-dev_tiny.safetensors"
# (name, batch, video latent [C,F,H,W] less batch, audio latent frames, text tokens, sigmas, frame rate,
#  first frames kept by the noise mask (LTXVImgToVideoInplace's), or 0)
CASES = [
    ("t2v", 1, (128, 3, 4, 6), 7, 5, [0.7], 24.0, 0),
    ("cfg_batch", 2, (128, 2, 3, 5), 5, 4, [0.35, 0.35], 25.0, 0),
    ("i2v_mask", 1, (128, 3, 4, 4), 6, 5, [0.9], 24.0, 1),
]
# VAE: frames [T,H,W] to encode, latents [B,C,F,h,w] to decode
VAE_ENCODE = [(9, 64, 96), (1, 70, 45)]
VAE_DECODE = [(1, 128, 2, 2, 3), (2, 128, 1, 2, 2)]


def b64(t: torch.Tensor) -> dict:
    t = t.detach().float().contiguous().cpu()
    return {"shape": list(t.shape), "f32": base64.b64encode(t.numpy().tobytes()).decode()}


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main(models: str, out: str) -> None:
    sys.argv = [sys.argv[0], "--cpu"]
    import comfy.options

    comfy.options.enable_args_parsing()
    import comfy.sd
    import comfy.utils

    torch.set_num_threads(1)
    path = f"{models}/{FILE}"
    patcher = comfy.sd.load_diffusion_model(path)
    model = patcher.model
    dm = model.diffusion_model
    record = {
        "sha256": sha256(path),
        "facts": {
            "class": type(model).__name__,
            "dtype": str(model.get_dtype()),
            "num_layers": dm.num_layers,
            "inner_dim": dm.inner_dim,
            "audio_inner_dim": dm.audio_inner_dim,
            "shift": float(model.model_sampling.shift),
            "rope_split": str(dm.split_positional_embedding),
        },
        "cases": {},
    }
    gen = torch.Generator().manual_seed(5)
    for name, batch, vshape, aframes, tokens, sigmas, rate, kept in CASES:
        video = torch.randn((batch, *vshape), generator=gen)
        audio = torch.randn((batch, 8, aframes, 16), generator=gen)
        context = torch.randn((batch, tokens, 2 * dm.caption_channels), generator=gen)
        sigma = torch.tensor(sigmas)
        packed, shapes = comfy.utils.pack_latents([video, audio])
        kwargs = {"latent_shapes": shapes, "frame_rate": rate}
        mask = None
        if kept:
            mask = torch.ones((batch, 1, *vshape[1:]))
            mask[:, :, :kept] = 0.0
            kwargs["denoise_mask"] = mask
        with torch.no_grad():
            denoised = model.apply_model(packed, sigma, c_crossattn=context, **kwargs)
        v_out, a_out = comfy.utils.unpack_latents(denoised, shapes)
        case = {
            "video": b64(video),
            "audio": b64(audio),
            "context": b64(context),
            "sigma": sigmas,
            "frame_rate": rate,
            "denoised_video": b64(v_out),
            "denoised_audio": b64(a_out),
        }
        if mask is not None:
            case["denoise_mask"] = b64(mask)
        record["cases"][name] = case
        print(name, tuple(v_out.shape), tuple(a_out.shape), float(v_out.abs().mean()), float(a_out.abs().mean()))
    _, _, vae, _ = comfy.sd.load_checkpoint_guess_config(path, output_vae=True, output_clip=False)
    record["vae"] = {"latent_channels": vae.latent_channels, "encode": [], "decode": []}
    for frames, height, width in VAE_ENCODE:
        pixels = torch.rand((frames, height, width, 3), generator=gen)
        record["vae"]["encode"].append({"pixels": b64(pixels), "latent": b64(vae.encode(pixels))})
    for shape in VAE_DECODE:
        latent = torch.randn(shape, generator=gen)
        record["vae"]["decode"].append({"latent": b64(latent), "image": b64(vae.decode(latent))})
    with open(out, "w") as f:
        json.dump(record, f)
    print(json.dumps(record["facts"]))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
