"""Record what ComfyUI's MoGe nodes compute on the tiny MoGe-2 demo file, as tests/models/test_moge.py compares.

MoGe is newer than ComfyUI 0.10.0: its newest module code (comfy/ldm/moge/{model,modules,geometry}.py, the DINOv2
encoder of comfy/image_encoders/dino2.py and the render helpers of comfy_extras/nodes_moge.py, read from
Comfy-Org/ComfyUI) was saved outside this repository (/tmp/mogeref/cref: dino2_new.py, moge_ref.py, the MoGe-2 path
only) and runs here on upstream 0.10.0's comfy package (ops.manual_cast, attention, BertAttention). As ComfyUI does
on a CPU, the model is built in float16 (text_encoder_dtype) with manual casting and run on float32 activations;
attention is PyTorch's (--use-pytorch-cross-attention), one thread.

    cd /tmp/c010/src && PYTHONPATH=/tmp/c010/shim:.:/tmp/mogeref/cref OMP_NUM_THREADS=1 /tmp/c010/venv/bin/python \\
        /work/main/scripts/record_comfyui_moge.py <workspace>/models/geometry_estimation/moge_2_vitl_normal_tiny.safetensors \\
        <workspace>/input/example.png

Writes tests/models/fixtures/comfyui_moge.json.xz: per case the MoGeInference outputs (points, depth, intrinsics,
mask, normal) and every MoGeRender mode, thinned to at most 4096 values each; and the template
utility_moge_depth_estimation's three previews on the demo workspace's example.png (LoadImage's pixels; the template
feeds it unresized below 2048 px, resolution level 2), as PreviewImage writes them (uint8), thinned as the others."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from comfyui_recording import b64, comfyui_on_cpu, png_rgb, sha256, write_json
from PIL import Image

FILE, EXAMPLE = sys.argv[1:3]
# PyTorch's attention, as ComfyUI runs it on a GPU (on a CPU without the flag it takes its own einsum kernel)
import comfy.options  # noqa: E402

comfy.options.enable_args_parsing()
comfyui_on_cpu(flags=("--use-pytorch-cross-attention",))
import comfy.ldm.modules.attention  # noqa: E402
import comfy.utils  # noqa: E402
import moge_ref  # noqa: E402

SOURCE = "Comfy-Org/ComfyUI newest comfy/ldm/moge + comfy_extras/nodes_moge.py, on upstream 0.10.0's comfy package"
# (seed, batch, height, width, resolution_level, fov_x_degrees, batch_size, force_projection, apply_mask)
CASES = [
    (1, 1, 40, 56, 2, 0.0, 4, True, True),
    (2, 2, 48, 36, 0, 0.0, 1, True, True),
    (3, 1, 30, 30, 9, 60.0, 4, False, False),
]
RENDERS = ["depth", "depth_colored", "normal_opengl", "normal_directx", "mask"]
MAX = 4096


def main() -> None:
    torch.set_num_threads(1)
    assert comfy.ldm.modules.attention.optimized_attention_for_device(
        torch.device("cpu"), small_input=True
    ).__name__ == ("attention_pytorch")
    model = moge_ref.MoGeModel(comfy.utils.load_torch_file(FILE, safe_load=True))
    cases = []
    for seed, batch, h, w, level, fov, bs, project, masked in CASES:
        image = torch.rand(batch, h, w, 3, generator=torch.Generator().manual_seed(seed))
        geometry = moge_ref.inference_node(model, image, level, fov, bs, project, masked)
        record = {
            "seed": seed,
            "shape": [batch, h, w, 3],
            "inputs": {
                "resolution_level": level,
                "fov_x_degrees": fov,
                "batch_size": bs,
                "force_projection": project,
                "apply_mask": masked,
            },
            "geometry": {k: b64(v.float(), MAX) for k, v in geometry.items() if k != "image"},
            "renders": {mode: b64(moge_ref.render(geometry, mode), MAX) for mode in RENDERS},
        }
        cases.append(record)
        print(seed, {k: tuple(v.shape) for k, v in geometry.items()}, float(geometry["mask"].float().mean()))
    # the template: LoadImage (RGB / 255), MoGeInference(2, 0, 4, True, True), MoGeRender depth_colored, depth, mask
    pixels = np.array(Image.open(EXAMPLE).convert("RGB")).astype(np.float32) / 255.0
    geometry = moge_ref.inference_node(model, torch.from_numpy(pixels)[None], 2, 0.0, 4, True, True)
    template = {mode: png_rgb(moge_ref.render(geometry, mode)[0], MAX) for mode in ("depth_colored", "depth", "mask")}
    out = Path(__file__).parents[1] / "tests" / "models" / "fixtures" / "comfyui_moge.json"
    record = {"source": SOURCE, "file_sha256": sha256(FILE), "cases": cases}
    record |= {"template": {"example_sha256": sha256(EXAMPLE), "previews": template}}
    print(write_json(out, record))


if __name__ == "__main__":
    main()
