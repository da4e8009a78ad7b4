"""Record what upstream ComfyUI 0.10.0 samples with WanContextWindowsManual on the demo Wan 2.1 text-to-video model
(nodes/models/wan_demo.py), as tests/nodes/test_context_windows.py compares with
(tests/nodes/fixtures/comfyui_context_windows_wan.json).

Run inside ComfyUI 0.10.0's own environment (it imports ComfyUI's modules and runs its node classes; nothing of
ComfyUI is copied here), after the tiny Wan files were written (nodes.models.wan_demo.build_demo_wan):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_context_windows_wan.py \\
        /work/main/tests/nodes/fixtures/comfyui_context_windows_wan.json <models dir>

ComfyUI is given the tiny files' sizes exactly as scripts/record_comfyui_wan.py does (its helpers are used). Each
case samples a 33-frame (9 latent frames) 32 px empty video latent with KSampler (3 steps, seed 7) on the model
through WanContextWindowsManual; the sampled latent is stored as float32 base64, with the plain run's.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import torch

# (context_length, context_overlap, schedule, stride, closed_loop, fuse, freenoise, sampler, cfg)
CASES = [
    (17, 8, "standard_static", 1, False, "pyramid", False, "euler", 5.0),
    (17, 8, "standard_uniform", 2, False, "overlap-linear", True, "euler", 5.0),
    (13, 4, "looped_uniform", 1, True, "relative", False, "euler", 5.0),
    (9, 0, "batched", 1, False, "flat", True, "euler", 1.0),
]
SETUP = {
    "width": 32,
    "height": 32,
    "length": 33,
    "steps": 3,
    "seed": 7,
    "scheduler": "simple",
    "positive": "a red cube on a wooden table",
    "negative": "blurry",
}


def main() -> None:
    out_path, models = sys.argv[1:3]
    sys.argv = [sys.argv[0], out_path, models, "-", "-", "-"]
    spec = importlib.util.spec_from_file_location("record_wan", Path(__file__).parent / "record_comfyui_wan.py")
    wan = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wan)
    import folder_paths
    from comfy_extras import nodes_context_windows as cwn
    from comfy_extras.nodes_hunyuan import EmptyHunyuanLatentVideo

    import nodes

    torch.set_num_threads(1)
    wan.tiny_widths()
    for folder in ("diffusion_models", "text_encoders"):
        folder_paths.add_model_folder_path(folder, f"{models}/{folder}", is_default=True)
    unet = wan.FILES["t2v"].split("/")[1]
    (model,) = nodes.UNETLoader().load_unet(unet, "default")
    (clip,) = nodes.CLIPLoader().load_clip(wan.FILES["text_encoder"].split("/")[1], "wan")
    (positive,) = nodes.CLIPTextEncode().encode(clip, SETUP["positive"])
    (negative,) = nodes.CLIPTextEncode().encode(clip, SETUP["negative"])
    (latent,) = wan.run_node(
        EmptyHunyuanLatentVideo,
        {"width": SETUP["width"], "height": SETUP["height"], "length": SETUP["length"], "batch_size": 1},
    )

    def sample(m, sampler: str, cfg: float) -> torch.Tensor:
        (out,) = nodes.KSampler().sample(
            m, SETUP["seed"], SETUP["steps"], cfg, sampler, SETUP["scheduler"], positive, negative, latent
        )
        return out["samples"]

    record = {
        "setup": SETUP,
        "files": {
            k: {"path": wan.FILES[k], "sha256": wan.sha256(f"{models}/{wan.FILES[k]}")} for k in ("t2v", "text_encoder")
        },
        "plain": wan.b64(sample(model, "euler", 5.0)),
        "cases": [],
    }
    for length, overlap, schedule, stride, closed, fuse, free, sampler, cfg in CASES:
        (windowed,) = wan.run_node(
            cwn.WanContextWindowsManualNode,
            {
                "model": model,
                "context_length": length,
                "context_overlap": overlap,
                "context_schedule": schedule,
                "context_stride": stride,
                "closed_loop": closed,
                "fuse_method": fuse,
                "freenoise": free,
            },
        )
        record["cases"].append(
            {
                "context_length": length,
                "context_overlap": overlap,
                "context_schedule": schedule,
                "context_stride": stride,
                "closed_loop": closed,
                "fuse_method": fuse,
                "freenoise": free,
                "sampler": sampler,
                "cfg": cfg,
                "samples": wan.b64(sample(windowed, sampler, cfg)),
            }
        )
    with open(out_path, "w") as f:
        json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
