"""Record what ComfyUI 0.3.64 computes for LTX-Video 0.9 on ltxv-tiny (nodes/models/ltxv_demo.py), as
tests/models/test_ltxv.py checks it (tests/models/fixtures/comfyui_ltxv.json).

Run inside ComfyUI 0.3.64's environment (nothing of ComfyUI is copied here), after the tiny file was written:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<torchvision shim>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_ltxv.py tests/models/fixtures/comfyui_ltxv.json <models>

Recorded: CheckpointLoaderSimple on the tiny checkpoint (which model config and VAE ComfyUI builds from it);
LTXVImgToVideo (64 x 96 pixels, 17 frames, strength 0.85) on a seeded 50 x 70 image with its VAE; one evaluation
of the model through ComfyUI's LTXV (apply_model at sigma 0.7 and frame rate 24) with seeded text states and a
text attention mask, once plain and once under LTXVImgToVideo's noise mask (per-token timesteps, as its
sampling passes the mask to process_timestep); and VAEDecode of a seeded latent."""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import MAX_RECORDED_VALUES, b64, comfyui_on_cpu, node_classes, run_node, sha256

OUT, MODELS = sys.argv[1:3]
comfyui_on_cpu()
import comfy.sampler_helpers  # noqa: E402
import comfy_extras.nodes_lt as lt  # noqa: E402
import folder_paths  # noqa: E402

CHECKPOINT = "checkpoints/ltx-video-2b-v0.9_tiny.safetensors"


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def main() -> None:
    torch.set_num_threads(1)
    folder_paths.add_model_folder_path("checkpoints", f"{MODELS}/checkpoints", is_default=True)
    classes = node_classes(lt)
    patcher, _, vae = run_node(classes["CheckpointLoaderSimple"], {"ckpt_name": CHECKPOINT.split("/")[1]})[:3]
    assert type(patcher.model.model_config).__name__ == "LTXV", type(patcher.model.model_config)
    context = seeded(1, 1, 12, 32)
    attention_mask = torch.ones(1, 12, dtype=torch.long)
    attention_mask[:, 9:] = 0
    cond = [[context, {"attention_mask": attention_mask}]]
    image = torch.rand(1, 50, 70, 3, generator=torch.Generator().manual_seed(2))
    pos, _, latent = run_node(
        classes["LTXVImgToVideo"],
        {
            "positive": cond,
            "negative": cond,
            "vae": vae,
            "image": image,
            "width": 96,
            "height": 64,
            "length": 17,
            "batch_size": 1,
            "strength": 0.85,
        },
    )
    samples, noise_mask = latent["samples"], latent["noise_mask"]
    x = seeded(3, *samples.shape)
    sigma = torch.tensor([0.7])
    model = patcher.model
    with torch.no_grad():
        plain = model.apply_model(x, sigma, c_crossattn=context, attention_mask=attention_mask, frame_rate=24)
        mask = comfy.sampler_helpers.prepare_mask(noise_mask, x.shape, torch.device("cpu"))
        masked = model.apply_model(
            x, sigma, c_crossattn=context, attention_mask=attention_mask, frame_rate=24, denoise_mask=mask
        )
        decoded = vae.decode(seeded(4, 1, 128, 3, 2, 2) * 0.5)
    out = {
        "source": "ComfyUI 0.3.64 (a125cd84)",
        "recorded_by": "scripts/record_comfyui_ltxv.py",
        "files": {"checkpoint": {"path": CHECKPOINT, "sha256": sha256(f"{MODELS}/{CHECKPOINT}")}},
        "model_config": type(model.model_config).__name__,
        "unet_config": {k: v for k, v in model.model_config.unet_config.items() if isinstance(v, (int, float, str))},
        "context": b64(context),
        "attention_mask": b64(attention_mask),
        "image": b64(image),
        "img_to_video": {
            "samples": b64(samples, MAX_RECORDED_VALUES),
            "noise_mask": b64(noise_mask),
            "positive_is_input": pos is cond,
        },
        "step": {
            "x": b64(x),
            "sigma": 0.7,
            "frame_rate": 24,
            "plain": b64(plain, MAX_RECORDED_VALUES),
            "masked": b64(masked, MAX_RECORDED_VALUES),
        },
        "decode": {"latent_seed": 4, "latent_shape": [1, 128, 3, 2, 2], "scale": 0.5, "image": b64(decoded, 32768)},
    }
    with open(OUT, "w") as f:
        json.dump(out, f)
        f.write("\n")


if __name__ == "__main__":
    main()
