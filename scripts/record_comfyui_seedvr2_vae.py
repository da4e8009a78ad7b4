"""Record what today's ComfyUI's SeedVR2 VAE computes on the tiny demo VAE (nodes/models/seedvr2_demo.py:
vae/seedvr2_ema_vae_fp16_tiny.safetensors), for tests/models/test_seedvr2_vae.py
(tests/models/fixtures/comfyui_seedvr2_vae.json.xz).

No runnable ComfyUI has SeedVR2 (0.10.0 predates it), so, as issues 38 and 39 ask, ComfyUI's own module is run at
development time: comfy/ldm/seedvr/vae.py of Comfy-Org/ComfyUI (1fa9472c, read 2026-12-05) saved outside this
repository as `seedvr_vae_ref` in a folder: its CPU code paths (the comfy-kitchen / CUDA channels-last branches,
which never run on a CPU, left out), its CausalMemoryCache as the plain dictionary it is on a CPU, comfy.ops as
torch.nn, vae_attention as scaled-dot-product attention, the convolutions' 0.5 GiB memory limit never reached at
these sizes. Its VideoAutoencoderKLWrapper is built with the tiny file's block widths (ComfyUI's wrapper fixes the
published 128/256/512/512) and loaded from the file, float32 as ComfyUI's VAE runs on a CPU. Around it, what
comfy/sd.py's VAE (033046cc) does for this VAE: pixels in as 2x-1, an IMAGE batch as one video, the encoded mean
times 0.9152 (format_encoded), decoded frames clamped (x+1)/2; VAEEncodeTiled / VAEDecodeTiled through the
wrapper's encode_tiled / decode_tiled (spatial tiles with cosine blending; tile and overlap as ComfyUI's nodes
pass them). Nothing of ComfyUI is committed. Given that folder:

    OMP_NUM_THREADS=1 python scripts/record_comfyui_seedvr2_vae.py <folder> \\
        tests/models/fixtures/comfyui_seedvr2_vae.json.xz

Inputs are seeded torch.rand draws (the test draws them again and checks their sum); outputs are recorded whole or
as a strided grid (MAX_RECORDED_VALUES).

Also the upscale graph of tests/e2e/test_seedvr2_vae_workflow.py without its sampler (the workspace's example.png
through SeedVR2Preprocess, VAEEncodeTiled, VAEDecodeTiled and SeedVR2PostProcessing lab), with the node bodies of
comfy_extras/nodes_seedvr.py from the same folder (`nodes_seedvr_ref`, as scripts/record_comfyui_seedvr2_nodes.py
uses them): the image SaveImage writes."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from comfyui_recording import MAX_RECORDED_VALUES, b64, png_rgb, sha256, write_json  # noqa: E402

from comfy_bridge.cli.demo_models import write_example_image  # noqa: E402
from nodes.models.seedvr2_demo import VAE_FILE, WIDTHS, build_demo_seedvr2  # noqa: E402

# (name, seed, pixel frames, height, width, tile, overlap): VAEEncode / VAEEncodeTiled inputs
ENCODES = [
    ("image", 1, 1, 32, 48, None, None),
    ("video", 2, 9, 32, 40, None, None),
    ("video_tiled", 3, 5, 80, 112, 64, 16),
    ("uncropped", 7, 5, 36, 44, None, None),  # sides not multiples of 8: ComfyUI does not crop for this VAE
]
# (name, seed, latent frames, height, width, tile, overlap): VAEDecode / VAEDecodeTiled inputs (pixels)
DECODES = [
    ("image", 4, 1, 4, 6, None, None),
    ("video", 5, 3, 4, 5, None, None),
    ("video_tiled", 6, 2, 10, 14, 64, 16),
]


def main() -> None:
    folder, out = sys.argv[1:3]
    sys.path.insert(0, folder)
    import seedvr_vae_ref as ref

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        (path,) = build_demo_seedvr2(Path(tmp))
        sd = {k: v.float() for k, v in load_file(path).items()}
        digest = sha256(str(path))
    vae = ref.VideoAutoencoderKLWrapper(WIDTHS)
    vae.load_state_dict(sd, strict=True)
    vae.eval()
    record: dict = {"file": VAE_FILE, "sha256": digest, "encode": [], "decode": []}
    with torch.no_grad():
        for name, seed, frames, h, w, tile, overlap in ENCODES:
            pixels = torch.rand((frames, h, w, 3), generator=torch.Generator().manual_seed(seed))
            x = (pixels * 2.0 - 1.0).movedim(-1, 0)[None]  # sd.py: process_input, an IMAGE batch as one video
            z = vae.encode(x) if tile is None else vae.encode_tiled(x, tile_x=tile, tile_y=tile, overlap=overlap)
            z = vae.comfy_format_encoded(z)
            record["encode"].append(
                {"name": name, "seed": seed, "shape": [frames, h, w, 3], "sum": float(pixels.double().sum()),
                 "tile": tile, "overlap": overlap, "latent": b64(z, MAX_RECORDED_VALUES)}
            )  # fmt: skip
        for name, seed, frames, h, w, tile, overlap in DECODES:
            latent = torch.randn((1, 16, frames, h, w), generator=torch.Generator().manual_seed(seed))
            if tile is None:
                y = vae.decode(latent)
            else:  # VAEDecodeTiled: tile and overlap in latent units (pixels // 8)
                y = vae.decode_tiled(latent, tile_x=tile // 8, tile_y=tile // 8, overlap=overlap // 8)
            image = y.add(1.0).div(2.0).clamp(0.0, 1.0).movedim(1, -1)
            image = image.reshape(-1, *image.shape[2:])
            record["decode"].append(
                {"name": name, "seed": seed, "shape": [1, 16, frames, h, w], "sum": float(latent.double().sum()),
                 "tile": tile, "overlap": overlap, "image": b64(image, MAX_RECORDED_VALUES)}
            )  # fmt: skip
        record["workflow"] = upscale_graph(vae, ref)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    write_json(out, record)


WORKFLOW_TILE, WORKFLOW_OVERLAP = 64, 16


def upscale_graph(vae, ref) -> dict:
    """LoadImage(example.png) -> SeedVR2Preprocess -> VAEEncodeTiled -> VAEDecodeTiled -> SeedVR2PostProcessing (lab)
    -> SaveImage, as ComfyUI runs it: the tiled nodes' tile and overlap (VAEDecodeTiled's in latent units)."""
    import nodes_seedvr_ref as nodes_ref
    import numpy as np
    from PIL import Image

    with tempfile.TemporaryDirectory() as tmp:
        write_example_image(Path(tmp) / "example.png")
        image = torch.from_numpy(np.array(Image.open(Path(tmp) / "example.png").convert("RGB"))).float()[None] / 255.0
    padded = nodes_ref.preprocess(image)[0]  # one clip of frames [T,H,W,3]
    x = (padded * 2.0 - 1.0).movedim(-1, 0)[None]
    latent = vae.comfy_format_encoded(
        vae.encode_tiled(x, tile_x=WORKFLOW_TILE, tile_y=WORKFLOW_TILE, overlap=WORKFLOW_OVERLAP)
    )
    t, o = WORKFLOW_TILE // 8, WORKFLOW_OVERLAP // 8
    decoded = vae.decode_tiled(latent, tile_x=t, tile_y=t, overlap=o).add(1.0).div(2.0).clamp(0.0, 1.0).movedim(1, -1)
    decoded = decoded.reshape(-1, *decoded.shape[2:])
    out = nodes_ref.postprocess(decoded, image, "lab")
    return {"tile": WORKFLOW_TILE, "overlap": WORKFLOW_OVERLAP, "image": png_rgb(out[0], MAX_RECORDED_VALUES)}


if __name__ == "__main__":
    main()
