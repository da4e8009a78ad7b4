"""Record ComfyUI's SDXL size conditioning vector (the "adm" input: pooled text embedding, then a 256-wide
timestep embedding of each of height, width, crop_h, crop_w, target_height, target_width) for a few
conditioning entries, as a test fixture.

Run inside ComfyUI's own environment (it calls ComfyUI's SDXL.encode_adm; nothing of ComfyUI is copied here):

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \
        /work/main/scripts/record_comfyui_sdxl_adm.py /work/main/tests/nodes/fixtures/comfyui_sdxl_adm.json.xz

Each case gives the entry's options and the latent size; the width and height default to the latent's size in
pixels, as ComfyUI's encode_model_conds sets them. The vectors are stored whole (float32, 1568 values each); the
pooled input is integer arithmetic, the same in any process. (They were once stored by their SHA-256 only, but a
sinusoidal embedding's float32 rounding differs by an ulp between CPUs, so the test compares values within ulps.)
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import torch
from comfyui_recording import b64, comfyui_on_cpu, write_json

comfyui_on_cpu(sys.argv[1])
import comfy.model_base  # noqa: E402
from comfy.ldm.modules.diffusionmodules.openaimodel import Timestep  # noqa: E402

CASES = [
    ({}, (8, 8)),
    ({}, (16, 12)),
    ({"width": 1024, "height": 1024, "crop_w": 0, "crop_h": 0, "target_width": 1024, "target_height": 1024}, (8, 8)),
    ({"width": 1024, "height": 768, "crop_w": 32, "crop_h": 16, "target_width": 512, "target_height": 640}, (8, 8)),
    ({"width": 640, "height": 64, "aesthetic_score": 6.0}, (8, 8)),
    ({"width": 0, "height": 16384, "crop_w": 16384, "crop_h": 0, "target_width": 7, "target_height": 3}, (8, 8)),
]


def pooled() -> torch.Tensor:
    return (((torch.arange(32) * 37 + 11) % 256).float() / 255.0).reshape(1, 32)


def main(out_path: str) -> None:
    model = SimpleNamespace(embedder=Timestep(256), noise_augmentor=None)
    cases = []
    for opts, (h, w) in CASES:
        kwargs = {"pooled_output": pooled(), "width": w * 8, "height": h * 8, **opts}
        adm = comfy.model_base.SDXL.encode_adm(model, **kwargs).float().contiguous()
        cases.append(
            {
                "options": opts,
                "latent_hw": [h, w],
                "shape": list(adm.shape),
                "adm": b64(adm),
            }
        )
    fixture = {
        "note": (
            "Recorded by scripts/record_comfyui_sdxl_adm.py with ComfyUI 0.3.64's SDXL.encode_adm "
            "(commit a125cd84b054a57729b5eecab930ca9408719832) on the CPU."
        ),
        "cases": cases,
    }
    write_json(out_path, fixture)


if __name__ == "__main__":
    main(sys.argv[1])
