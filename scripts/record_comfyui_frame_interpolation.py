"""Record what ComfyUI's frame interpolation nodes compute (FrameInterpolationModelLoader, FrameInterpolate: newer than
every ComfyUI that runs here), as tests/models/test_frame_interpolation.py checks
(tests/models/fixtures/comfyui_frame_interpolation.json.xz).

The reference is the newest ComfyUI's own code, read 2026-12-06 and kept outside the repository in REF_DIR:
comfy_extras/nodes_frame_interpolation.py (hawken93/ComfyUI b26d75b4, the newest version in the code index, the one
with the loader's device option; comfyanonymous/ComfyUI 2ee6688b computes the same), saved as
nodes_frame_interpolation_ref.py, and comfy_extras/frame_interpolation_models/film_net.py (8ce12e26) and ifnet.py
(9434853a) under REF_DIR/comfy_extras/. They run on ComfyUI 0.10.0, whose model_management lacks the newer device
plumbing they call (device options, device-aware offload and intermediate devices, CoreModelPatcher): those are set
here to 0.10.0's CPU answers. Nothing of ComfyUI is copied here. Run inside ComfyUI 0.10.0's environment:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<shim>:<REF_DIR>:/work/main/scripts:/work/main:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_frame_interpolation.py \\
        /work/main/tests/models/fixtures/comfyui_frame_interpolation.json.xz <models dir> <example.mp4>

(REF_DIR before the source, so its comfy_extras/frame_interpolation_models is found: 0.10.0 has none.) The models
are the demo-models files (nodes.models.frame_interpolation_demo): the full-size seeded FILM at the template's name
and the tiny RIFE in Practical-RIFE's names. Recorded: FrameInterpolate's frames for FILM on 3 seeded 64x72 frames
(multiplier 3) and for RIFE on 3 seeded 40x48 frames (multiplier 4: three timesteps in one batch, frames
reflect-padded to 64x64), thinned; and the template's run (workflows_json/frame_interpolation_template.json): the
workspace's example.mp4 (comfy_bridge/cli/demo_models.py's 64x64, 9 frames) decoded by ComfyUI's VideoFromFile
(LoadVideo + GetVideoComponents), FILM at multiplier 2, the frames as SaveImage would write them, thinned.
"""

from __future__ import annotations

import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, png_rgb, run_node, sha256, write_json

OUT, MODELS, CLIP = sys.argv[1:4]
comfyui_on_cpu()
import comfy.model_management as mm  # noqa: E402
import comfy.model_patcher  # noqa: E402
import folder_paths  # noqa: E402

# the newer device plumbing the reference calls, as 0.10.0 answers it on a CPU
mm.get_gpu_device_options = lambda: ["default", "cpu"]
mm.pick_device_for_option = lambda option: mm.get_torch_device()
_offload, _intermediate = mm.unet_offload_device, mm.intermediate_device
mm.unet_offload_device = lambda *device: _offload()
mm.intermediate_device = lambda *device: _intermediate()
mm.intermediate_dtype = lambda: torch.float32
comfy.model_patcher.CoreModelPatcher = comfy.model_patcher.ModelPatcher
import nodes_frame_interpolation_ref as ref  # noqa: E402

SOURCE = "newest comfy_extras/nodes_frame_interpolation.py + frame_interpolation_models (read 2026-12-06) on 0.10.0"
FILM = "film_net_fp16.safetensors"
RIFE = "rife_v4.26_tiny.safetensors"
CASES = {"film": (FILM, 11, (3, 64, 72), 3), "rife": (RIFE, 12, (3, 40, 48), 4)}  # file, seed, frames, multiplier


def frames(seed: int, count: int, height: int, width: int) -> torch.Tensor:
    """Seeded frames with some structure: a picture drifting sideways plus a little noise (the test regenerates)."""
    gen = torch.Generator().manual_seed(seed)
    picture = torch.rand(height, width + 4 * count, 3, generator=gen)
    shifted = torch.stack([picture[:, 3 * i : 3 * i + width] for i in range(count)])
    return (shifted * 0.9 + 0.1 * torch.rand(shifted.shape, generator=gen)).contiguous()


def main() -> None:
    folder_paths.add_model_folder_path("frame_interpolation", f"{MODELS}/frame_interpolation")
    out = {"source": SOURCE, "files": {}, "cases": {}}
    for name, (file, seed, shape, multiplier) in CASES.items():
        out["files"][file] = sha256(f"{MODELS}/frame_interpolation/{file}")
        (model,) = run_node(ref.FrameInterpolationModelLoader, {"model_name": file})
        images = frames(seed, *shape)
        with torch.no_grad():
            (result,) = run_node(
                ref.FrameInterpolate, {"interp_model": model, "images": images, "multiplier": multiplier}
            )
        out["cases"][name] = {
            "file": file,
            "seed": seed,
            "shape": list(shape),
            "multiplier": multiplier,
            "images": b64(result.float(), 32768),
        }
        print(name, tuple(result.shape), float(result.mean()))
    from comfy_api.latest import InputImpl

    clip = InputImpl.VideoFromFile(CLIP).get_components().images
    (model,) = run_node(ref.FrameInterpolationModelLoader, {"model_name": FILM})
    with torch.no_grad():
        (result,) = run_node(ref.FrameInterpolate, {"interp_model": model, "images": clip, "multiplier": 2})
    out["template"] = {"clip": sha256(CLIP), "frames": png_rgb(result, 32768)}
    print("template", tuple(clip.shape), tuple(result.shape))
    write_json(OUT, out)


if __name__ == "__main__":
    main()
