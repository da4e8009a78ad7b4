"""Record what ComfyUI's Depth Anything 3 nodes compute on the tiny DA3 Mono-Large demo file, as
tests/models/test_depth_anything3.py compares.

DA3 is newer than ComfyUI 0.10.0: its newest module code (the mono path of comfy/ldm/depth_anything_3/{model,dpt,
preprocess}.py, DINOv2's get_intermediate_layers of comfy/image_encoders/dino2.py, and _run_da3 / DA3Render of
comfy_extras/nodes_depth_anything_3.py, read from Comfy-Org/ComfyUI) was saved outside this repository
(/tmp/da3ref/da3_ref.py, beside MoGe's copy of the newest dino2.py in /tmp/mogeref/cref) and runs here on upstream
0.10.0's comfy package (ops.manual_cast, attention, common_upscale's Lanczos). As ComfyUI loads a diffusion model on
a CPU, the weights are float32 (the file's float16 upcast); attention is PyTorch's, one thread.

    cd /tmp/c010/src && PYTHONPATH=/tmp/c010/shim:.:/tmp/mogeref/cref:/tmp/da3ref OMP_NUM_THREADS=1 \\
        /tmp/c010/venv/bin/python /work/main/scripts/record_comfyui_da3.py \\
        <workspace>/models/geometry_estimation/depth_anything_3_mono_large_tiny.safetensors <workspace>/input/example.png

Writes tests/models/fixtures/comfyui_da3.json.xz: per case DA3Inference's depth and sky and every DA3Render mode
(thinned to at most 4096 values each); and the image template's preview on the workspace's example.png
(LoadImage's pixels, DA3Inference 504 upper_bound_resize mono, DA3Render depth v2_style) as PreviewImage writes it."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from comfyui_recording import b64, comfyui_on_cpu, png_rgb, sha256, write_json
from PIL import Image

FILE, EXAMPLE = sys.argv[1:3]
import comfy.options  # noqa: E402

comfy.options.enable_args_parsing()
comfyui_on_cpu(flags=("--use-pytorch-cross-attention",))
import comfy.ldm.modules.attention  # noqa: E402
import comfy.utils  # noqa: E402
import da3_ref  # noqa: E402

SOURCE = "Comfy-Org/ComfyUI newest comfy/ldm/depth_anything_3 + comfy_extras/nodes_depth_anything_3.py (mono path)"
# the tiny file's config, as ComfyUI's DepthAnything3Net would be given it for a 64-wide, 24-layer ViT-L
CONFIG = dict(dim=64, layers=24, heads=1, out_layers=(4, 11, 17, 23), features=16, out_channels=(8, 16, 32, 32))
# (seed, batch, height, width, resolution, resize_method)
CASES = [
    (1, 2, 40, 56, 140, "upper_bound_resize"),
    (2, 1, 64, 64, 504, "lower_bound_resize"),
    (3, 1, 30, 90, 280, "upper_bound_resize"),
]
# (name, output, normalization, apply_sky_clip, colored)
RENDERS = [
    ("depth_v2", "depth", "v2_style", False, False),
    ("depth_v2_skyclip", "depth", "v2_style", True, False),
    ("depth_colored_minmax", "depth_colored", "min_max", False, False),
    ("depth_raw", "depth", "raw", False, False),
    ("depth_colored_raw_skyclip", "depth_colored", "raw", True, False),
    ("sky_mask", "sky_mask", None, None, False),
    ("sky_mask_colored", "sky_mask", None, None, True),
]
MAX = 4096


def main() -> None:
    torch.set_num_threads(1)
    assert comfy.ldm.modules.attention.optimized_attention_for_device(
        torch.device("cpu"), small_input=True
    ).__name__ == ("attention_pytorch")
    model = da3_ref.DA3Mono(**CONFIG)
    sd = comfy.utils.load_torch_file(FILE, safe_load=True)
    missing, unexpected = model.load_state_dict({k: v.float() for k, v in sd.items()}, strict=False)
    # MoGe's copy of dino2.py always makes a mask token (the newest skips it for DA3); it is unused in the forward
    assert set(missing) <= {"backbone.embeddings.mask_token"} and not unexpected, (missing, unexpected)
    model.eval()
    cases = []
    for seed, batch, h, w, res, method in CASES:
        image = torch.rand(batch, h, w, 3, generator=torch.Generator().manual_seed(seed))
        geometry = da3_ref.run_da3(model, image, res, method)
        renders = {}
        for name, output, norm, clip, colored in RENDERS:
            renders[name] = b64(da3_ref.render(geometry, output, norm, clip, colored), MAX)
        cases.append(
            {
                "seed": seed,
                "shape": [batch, h, w, 3],
                "inputs": {"resolution": res, "resize_method": method},
                "geometry": {k: b64(geometry[k], MAX) for k in ("depth", "sky")},
                "renders": renders,
            }
        )
        print(seed, float(geometry["depth"].mean()), float((geometry["sky"] >= 0.3).float().mean()))
    pixels = np.array(Image.open(EXAMPLE).convert("RGB")).astype(np.float32) / 255.0
    geometry = da3_ref.run_da3(model, torch.from_numpy(pixels)[None], 504, "upper_bound_resize")
    preview = png_rgb(da3_ref.render(geometry, "depth", "v2_style", False)[0], MAX)
    out = Path(__file__).parents[1] / "tests" / "models" / "fixtures" / "comfyui_da3.json"
    record = {"source": SOURCE, "file_sha256": sha256(FILE), "renders": [list(r) for r in RENDERS], "cases": cases}
    record |= {"template": {"example_sha256": sha256(EXAMPLE), "preview": preview}}
    print(write_json(out, record))


if __name__ == "__main__":
    main()
