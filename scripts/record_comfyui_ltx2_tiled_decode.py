"""Record upstream ComfyUI 0.10.0's VAEDecodeTiled on ltx2-tiny's video VAE (nodes/models/ltx2_demo.py), for
tests/models/test_ltx2_tiled_decode.py (tests/models/fixtures/comfyui_ltx2_tiled_decode.json.xz): seeded latents
decoded by ComfyUI's own node (nodes.VAEDecodeTiled: tiles in time, height and width, blended with feathers) at
settings that give one tile and several.

Run inside ComfyUI 0.10.0's own environment (commit 79cdbc81 of hiddenswitch/ComfyUI; nothing of ComfyUI is
copied here; recipe in ../shared/reference/running-real-comfyui.md), after the demo files were written:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_ltx2_tiled_decode.py <models dir> \\
        /work/main/tests/models/fixtures/comfyui_ltx2_tiled_decode.json.xz
"""

from __future__ import annotations

import hashlib
import sys

import torch
from comfyui_recording import MAX_RECORDED_VALUES, b64, write_json

CHECKPOINT = "checkpoints/ltx-2-19b-dev_tiny.safetensors"
# (latent shape, tile_size, overlap, temporal_size, temporal_overlap)
CASES = [
    ((1, 128, 5, 6, 7), 128, 32, 16, 8),
    ((2, 128, 3, 5, 4), 128, 32, 24, 8),
    ((1, 128, 2, 2, 3), 768, 64, 4096, 4),  # the LTX-2.3 template's settings: one tile
]


def main(models: str, out: str) -> None:
    sys.argv = [sys.argv[0], "--cpu"]
    import comfy.options

    comfy.options.enable_args_parsing()
    import comfy.sd

    import nodes

    torch.set_num_threads(1)
    path = f"{models}/{CHECKPOINT}"
    _, _, vae, _ = comfy.sd.load_checkpoint_guess_config(path, output_vae=True, output_clip=False)
    with open(path, "rb") as f:
        record = {"sha256": hashlib.sha256(f.read()).hexdigest(), "cases": []}
    gen = torch.Generator().manual_seed(3)
    for shape, tile, overlap, t_size, t_overlap in CASES:
        latent = torch.randn(shape, generator=gen)
        (image,) = nodes.VAEDecodeTiled().decode(vae, {"samples": latent}, tile, overlap, t_size, t_overlap)
        record["cases"].append(
            {
                "latent": b64(latent),
                "settings": [tile, overlap, t_size, t_overlap],
                "image": b64(image, MAX_RECORDED_VALUES),
            }
        )
        print(shape, tuple(image.shape), float(image.mean()))
    write_json(out, record)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
