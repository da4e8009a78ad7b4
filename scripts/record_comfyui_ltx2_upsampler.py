"""Record what upstream ComfyUI 0.10.0's LatentUpscaleModelLoader and LTXVLatentUpsampler compute with tiny latent
upsampler files in the published layout (nodes/models/ltx2_upsampler.py), for tests/models/test_ltx2_upsampler.py
(tests/models/fixtures/comfyui_ltx2_upsampler.json).

Two steps. First, in this project's environment, write ltx2-tiny (the checkpoint whose video VAE gives the latent
statistics, and the demo's x2 upsampler) and the rational-resampler variant below into a models folder:

    python scripts/record_comfyui_ltx2_upsampler.py --prepare <models dir>

Then inside ComfyUI 0.10.0's own environment (commit 79cdbc81 of hiddenswitch/ComfyUI; it imports ComfyUI's
modules, nothing of ComfyUI is copied here; recipe in ../shared/reference/running-real-comfyui.md):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_ltx2_upsampler.py <models dir> \\
        /work/main/tests/models/fixtures/comfyui_ltx2_upsampler.json

Each upsampler file is loaded by ComfyUI's own LatentUpscaleModelLoader (comfy_extras/nodes_hunyuan.py, from the
latent_upscale_models folder), the VAE by comfy.sd.load_checkpoint_guess_config, and LTXVLatentUpsampler
(comfy_extras/nodes_lt_upsampler.py) upsamples seeded latents. Recorded: the files' sha256, the latents, the
outputs (float32 base64) and both nodes' /object_info entries.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys

import torch

CHECKPOINT = "checkpoints/ltx-2-19b-dev_tiny.safetensors"
X2_FILE = "latent_upscale_models/ltx-2-spatial-upscaler-x2-1.0_tiny.safetensors"
# The rational resampler (PixelShuffle by 3, blur and stride 2): ComfyUI's other upsampler branch.
RATIONAL_FILE = "latent_upscale_models/ltx-upsampler-rational-x1.5_tiny.safetensors"
RATIONAL_CONFIG = {
    "_class_name": "LatentUpsampler",
    "in_channels": 128,
    "mid_channels": 32,
    "num_blocks_per_stage": 2,
    "dims": 3,
    "spatial_upsample": True,
    "temporal_upsample": False,
    "spatial_scale": 1.5,
    "rational_resampler": True,
}
# (file, latent shape [B,C,F,H,W])
CASES = [
    (X2_FILE, (1, 128, 2, 3, 4)),
    (X2_FILE, (2, 128, 1, 2, 3)),
    (RATIONAL_FILE, (1, 128, 2, 4, 6)),
]


def b64(t: torch.Tensor) -> dict:
    t = t.detach().float().contiguous().cpu()
    return {"shape": list(t.shape), "f32": base64.b64encode(t.numpy().tobytes()).decode()}


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def prepare(models: str) -> None:
    """Write the files the recording reads (this project's environment)."""
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from nodes.models.ltx2_demo import build_demo_ltx2, build_upsampler

    build_demo_ltx2(Path(models))
    build_upsampler(Path(models) / RATIONAL_FILE, RATIONAL_CONFIG)


def main(models: str, out: str) -> None:
    sys.argv = [sys.argv[0], "--cpu", "--use-pytorch-cross-attention"]
    import comfy.options

    comfy.options.enable_args_parsing()
    import comfy.sd
    import folder_paths
    from comfy_extras.nodes_hunyuan import LatentUpscaleModelLoader
    from comfy_extras.nodes_lt_upsampler import LTXVLatentUpsampler

    torch.set_num_threads(1)
    folder_paths.add_model_folder_path("latent_upscale_models", f"{models}/latent_upscale_models", is_default=True)
    _, _, vae, _ = comfy.sd.load_checkpoint_guess_config(f"{models}/{CHECKPOINT}", output_vae=True, output_clip=False)
    record = {"sha256": {f: sha256(f"{models}/{f}") for f in (CHECKPOINT, X2_FILE, RATIONAL_FILE)}, "cases": []}
    gen = torch.Generator().manual_seed(11)
    for name, shape in CASES:
        model = LatentUpscaleModelLoader.execute(name.split("/", 1)[1]).result[0]
        latent = torch.randn(shape, generator=gen)
        (out_latent,) = LTXVLatentUpsampler().upsample_latent({"samples": latent}, model, vae)
        record["cases"].append(
            {"file": name, "latent": b64(latent), "upsampled": b64(out_latent["samples"]), "dtype": str(latent.dtype)}
        )
        print(name, shape, tuple(out_latent["samples"].shape), float(out_latent["samples"].abs().mean()))
    record["object_info"] = {
        "LatentUpscaleModelLoader": LatentUpscaleModelLoader.GET_NODE_INFO_V1(),
        "LTXVLatentUpsampler": _v1_info(LTXVLatentUpsampler, "comfy_extras.nodes_lt_upsampler"),
    }
    record["object_info"]["LatentUpscaleModelLoader"]["python_module"] = "comfy_extras.nodes_hunyuan"
    with open(out, "w") as f:
        json.dump(record, f)


def _v1_info(cls, module: str) -> dict:
    """A V1 class's /object_info entry: the fields ComfyUI's server reads off the class (server.py's node_info),
    python_module as its extra-node loader sets it for a comfy_extras file."""
    inputs = cls.INPUT_TYPES()
    return {
        "input": inputs,
        "input_order": {k: list(v) for k, v in inputs.items()},
        "output": list(cls.RETURN_TYPES),
        "output_is_list": list(getattr(cls, "OUTPUT_IS_LIST", [False] * len(cls.RETURN_TYPES))),
        "output_name": list(getattr(cls, "RETURN_NAMES", cls.RETURN_TYPES)),
        "name": cls.__name__,
        "display_name": cls.__name__,
        "description": getattr(cls, "DESCRIPTION", ""),
        "python_module": module,
        "category": getattr(cls, "CATEGORY", "sd"),
        "output_node": bool(getattr(cls, "OUTPUT_NODE", False)),
        "experimental": bool(getattr(cls, "EXPERIMENTAL", False)),
        "search_aliases": getattr(cls, "SEARCH_ALIASES", []),
    }


if __name__ == "__main__":
    if sys.argv[1] == "--prepare":
        prepare(sys.argv[2])
    else:
        main(sys.argv[1], sys.argv[2])
