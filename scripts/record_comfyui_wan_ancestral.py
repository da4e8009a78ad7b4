"""Record upstream ComfyUI 0.10.0's KSampler output on wan-tiny's text-to-video model with the samplers that draw
noise per step (ancestral and SDE) and with euler as a control, as tests/models/fixtures/comfyui_wan_ancestral.json.

Run like scripts/record_comfyui_wan.py (whose helpers it imports; nothing of ComfyUI is copied here):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_wan_ancestral.py /work/main/tests/models/fixtures/comfyui_wan_ancestral.json \\
        <models dir>

Each case: ModelSamplingSD3 (shift 5) on the Wan 2.1 text-to-video tiny model, seeded positive and negative
contexts, EmptyHunyuanLatentVideo's latent, KSampler (cfg 3.5, simple schedule); the raw latent it returns.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

OUT, MODELS = sys.argv[1:3]
sys.argv[1:] = [OUT, MODELS, "/nonexistent", "/nonexistent", "/nonexistent"]  # record_comfyui_wan's arguments
sys.path.insert(0, str(Path(__file__).resolve().parent))
import record_comfyui_wan as base  # it imports ComfyUI with --cpu: before any other ComfyUI module
import torch

# (sampler, seed, steps, width, height, length, batch)
CASES = [
    ("euler", 42, 4, 48, 32, 5, 1),
    ("euler_ancestral", 42, 4, 48, 32, 5, 1),
    ("euler_ancestral", 7, 3, 32, 32, 9, 2),
    ("dpmpp_2s_ancestral", 42, 3, 48, 32, 5, 1),
    ("dpmpp_sde", 42, 3, 48, 32, 5, 1),
    ("dpmpp_2m_sde", 42, 4, 48, 32, 5, 1),
    ("er_sde", 42, 4, 48, 32, 5, 1),
]


def main() -> None:
    import folder_paths

    logging.getLogger().setLevel(logging.ERROR)
    torch.set_num_threads(1)
    base.tiny_widths()
    folder_paths.add_model_folder_path("diffusion_models", f"{MODELS}/diffusion_models", is_default=True)
    classes = base.node_classes()
    (unet,) = base.run_node(
        classes["UNETLoader"], {"unet_name": base.FILES["t2v"].split("/")[1], "weight_dtype": "default"}
    )
    (model,) = base.run_node(classes["ModelSamplingSD3"], {"model": unet, "shift": 5.0})
    positive, negative = base.seeded(20, 1, 512, 32), base.seeded(21, 1, 512, 32)
    cases = []
    for sampler, seed, steps, width, height, length, batch in CASES:
        (latent,) = base.run_node(
            classes["EmptyHunyuanLatentVideo"],
            {"width": width, "height": height, "length": length, "batch_size": batch},
        )
        (out,) = base.run_node(
            classes["KSampler"],
            {
                "model": model,
                "seed": seed,
                "steps": steps,
                "cfg": 3.5,
                "sampler_name": sampler,
                "scheduler": "simple",
                "positive": [[positive, {}]],
                "negative": [[negative, {}]],
                "latent_image": latent,
                "denoise": 1.0,
            },
        )
        cases.append(
            {
                "sampler": sampler,
                "seed": seed,
                "steps": steps,
                "size": [width, height, length, batch],
                "samples": base.b64(out["samples"]),
            }
        )
    fixture = {
        "source": base.SOURCE,
        "recorded_by": "scripts/record_comfyui_wan_ancestral.py",
        "file": {"path": base.FILES["t2v"], "sha256": base.sha256(f"{MODELS}/{base.FILES['t2v']}")},
        "positive": base.b64(positive),
        "negative": base.b64(negative),
        "cases": cases,
    }
    with open(OUT, "w") as f:
        json.dump(fixture, f)


if __name__ == "__main__":
    main()
