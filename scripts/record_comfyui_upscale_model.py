"""Record what ComfyUI's UpscaleModelLoader + ImageUpscaleWithModel give for the demo ESRGAN, as a test fixture.

Run inside ComfyUI's own environment (it imports ComfyUI's modules and spandrel; nothing of ComfyUI is
copied here), on the demo model file that `comfy-cluster demo-models` writes:

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_upscale_model.py <models>/upscale_models/esrgan-tiny-x4.safetensors \\
        /work/main/tests/nodes/fixtures/comfyui_upscale_model.json.xz

The images are made by `images()` below from a seeded torch generator (the test makes the same ones); one
is wider than ComfyUI's 512-pixel tile, so the tiled blend is covered, and one is 1x1, so spandrel's
padding to its minimum size is. For each it stores the output's float32 values (at most 8192 of them, at a strided
grid of positions for the larger outputs; the test compares within float32 rounding, as a recording made on one CPU
is met on another within a few ulps, not bit for bit).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys

import torch
from comfyui_recording import b64, write_json

RECORDED_VALUES = 8192  # per case: keeps the fixture small (the wide case's output has 305280 values)


def images() -> dict[str, torch.Tensor]:
    """Fixed IMAGE batches [B,H,W,3] in 0..1 (shared with tests/nodes/test_upscale_model.py)."""
    gen = torch.Generator().manual_seed(1234)
    return {
        "small": torch.rand(1, 24, 20, 3, generator=gen),
        "batch_of_two": torch.rand(2, 9, 14, 3, generator=gen),
        "one_pixel": torch.rand(1, 1, 1, 3, generator=gen),
        "wider_than_a_tile": torch.rand(1, 12, 530, 3, generator=gen),
    }


def main(model_path: str, out_path: str) -> None:
    from comfy.cli_args import args

    args.cpu = True  # as the server runs with --cpu; must be set before model_management is imported
    import comfy.utils
    from comfy_extras.nodes_upscale_model import ImageUpscaleWithModel
    from spandrel import ModelLoader

    # The loader node's body without folder_paths: the same state-dict read and spandrel call.
    model = ModelLoader().load_from_state_dict(comfy.utils.load_torch_file(model_path, safe_load=True)).eval()
    cases = {}
    for name, image in images().items():
        out = ImageUpscaleWithModel.execute(model, image).result[0]
        cases[name] = b64(out, RECORDED_VALUES)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    record = {
        "comfyui_commit": commit or "a125cd84b054a57729b5eecab930ca9408719832",
        "recorded_by": "scripts/record_comfyui_upscale_model.py (ComfyUI's ImageUpscaleWithModel.execute "
        "on spandrel's model of the demo file, CPU, float32)",
        "model_sha256": hashlib.sha256(open(model_path, "rb").read()).hexdigest(),
        "scale": model.scale,
        "cases": cases,
    }
    write_json(out_path, record)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
