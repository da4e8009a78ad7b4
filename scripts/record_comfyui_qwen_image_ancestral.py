"""Record upstream ComfyUI 0.10.0's images for the Qwen-Image workflow variants whose sampler draws noise at every
step (tests/models/fixtures/comfyui_qwen_image_010.json): there 0.10.0 and 0.3.64 differ, since 0.10.0's CPU noise
sampler is seeded with seed + 1. The rest of the Qwen-Image fixture stays 0.3.64's.

Run like scripts/record_comfyui_qwen_image.py (whose setup and variants it imports; nothing of ComfyUI is copied
here), in ComfyUI 0.10.0's environment:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:. OMP_NUM_THREADS=2 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_qwen_image_ancestral.py \\
        /work/main/tests/models/fixtures/comfyui_qwen_image_010.json <models dir> /work/main/workflows_json/qwen_image.json
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import record_comfyui_qwen_image as base  # it reads the same arguments and imports ComfyUI with --cpu
import torch

PER_STEP_NOISE = ("euler_ancestral",)


def main() -> None:
    import folder_paths

    logging.getLogger().setLevel(logging.ERROR)
    torch.set_num_threads(1)
    base.tiny_widths()
    for folder in ("diffusion_models", "text_encoders", "vae", "embeddings", "loras"):
        folder_paths.add_model_folder_path(folder, f"{base.MODELS}/{folder}", is_default=True)
    base.VARIANTS = {
        name: changes
        for name, changes in base.VARIANTS.items()
        if any(len(c) == 3 and c[1] == "sampler_name" and c[2] in PER_STEP_NOISE for c in changes)
    }
    fixture = {
        "source": "ComfyUI 0.10.0 (hiddenswitch/ComfyUI 79cdbc81, upstream's commits)",
        "recorded_by": "scripts/record_comfyui_qwen_image_ancestral.py",
        "files": {k: {"path": v, "sha256": base.sha256(f"{base.MODELS}/{v}")} for k, v in base.FILES.items()},
        "variants": base.record_variants(),
    }
    with open(base.OUT, "w") as f:
        json.dump(fixture, f)


if __name__ == "__main__":
    main()
