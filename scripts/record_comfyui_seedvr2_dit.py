"""Record what today's ComfyUI's SeedVR2 transformer (NaDiT) computes on the tiny demo transformers
(nodes/models/seedvr2_demo.py: diffusion_models/seedvr2_3b_tiny and seedvr2_7b_tiny, plus the 7B's other published
layout, separate video/text weights in every block with GELU MLPs), for tests/models/test_seedvr2_dit.py
(tests/models/fixtures/comfyui_seedvr2_dit.json.xz).

No runnable ComfyUI has SeedVR2 (0.10.0 predates it), so, as issues 38 and 39 ask, ComfyUI's own module is run at
development time: comfy/ldm/seedvr/model.py of comfyanonymous/ComfyUI (00523e05, the newest stored, read 2026-12-05)
with comfy/ldm/seedvr/attention.py (c7b2c3b5) and constants.py, saved outside this repository as `seedvr_dit_ref` in a
folder: its CPU inference path (the memory-driven chunking as one chunk, which changes no number), comfy.ops as
torch.nn (RMSNorm as torch.nn.RMSNorm), optimized_attention as scaled-dot-product attention per window, flux's
apply_rope1 and get_timestep_embedding retyped. ComfyUI's detection (comfy/model_detection.py at 0b61ce5b) picks the
variant by which block exists (blocks.35 -> 7B, blocks.31 -> 3B) and fixes the published widths; the NaDiT is built
here with the tiny file's widths instead (32 wide, 2 heads of 16, rope_dim 12 -> 2 frequencies per axis) and the
variant's other settings as detection gives them (3B: mm_layers 10, SwiGLU, mmrope3d, the output norm; 7B: rope3d,
mm_layers 10 + SwiGLU or 36 + GELU), its 7B switch (vid_dim == 3072) passed explicitly. Weights come from the file
(float16, run as float32 as ComfyUI runs on a CPU). Nothing of ComfyUI is committed. Given that folder:

    OMP_NUM_THREADS=1 python scripts/record_comfyui_seedvr2_dit.py <folder> tests/models/fixtures/comfyui_seedvr2_dit.json.xz

The forward is called as comfy/model_base.py's SeedVR2 calls it at cfg 1 (one branch: cond_or_uncond [0]): the noisy
latent [B,16,T,H,W], the timestep (sigma times 1000), the file's positive embeddings as the context [1, 58, 5120] and
SeedVR2Conditioning's `condition` [B,17,T,H,W]. Inputs are seeded torch.randn draws (the test draws them again and
checks their sum); outputs are recorded whole or as a strided grid (MAX_RECORDED_VALUES).

Also the upscale graphs of workflows_json/seedvr2_3b_upscale_image.json and seedvr2_7b_upscale_image.json
(scripts/seedvr2_workflow.py: the utility_seedvr2_{3b,7b}_int8_upscale_image templates on the tiny files;
tests/e2e/test_seedvr2_workflow.py), as ComfyUI runs
it with the same folder's nodes_seedvr_ref (nodes_seedvr.py) and seedvr_vae_ref (vae.py, as
scripts/record_comfyui_seedvr2_vae.py uses them): the workspace's example.png, ResizeImageMaskNode by 1 with lanczos
(comfy.utils' PIL round trip through 8-bit values), SeedVR2Preprocess, VAEEncodeTiled (512 tile, 128 overlap),
SeedVR2Conditioning on the tiny 3B or 7B, KSampler (seed 42, 1 step, cfg 1, euler, simple, denoise 1: comfy.sample's noise
for the seed, the flow model's sigmas [1, 0] at shift 1, so one evaluation at timestep 1000 and the denoised latent
x - v), VAEDecodeTiled, SeedVR2PostProcessing (none): the image SaveImage writes."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from comfyui_recording import MAX_RECORDED_VALUES, b64, png_rgb, sha256, write_json  # noqa: E402

from nodes.models.seedvr2_demo import (  # noqa: E402
    TRANSFORMER_FILES,
    build_demo_seedvr2_transformers,
    tiny_dit_state_dict,
)

# (variant, seed, latent frames, height, width, timestep)
CASES = [
    ("3b", 11, 1, 8, 12, 1000.0),  # one window
    ("3b", 12, 3, 48, 40, 731.25),  # 3 x 2 x 2 windows, and that grid shifted by half a window
    ("7b", 13, 1, 10, 14, 1000.0),
    ("7b", 14, 2, 48, 40, 412.5),
    ("7b_separate", 15, 2, 44, 36, 1000.0),
]


def reference_model(ref, variant: str, sd: dict) -> torch.nn.Module:
    settings = {
        "3b": dict(num_layers=32, mlp_type="swiglu", mm_layers=10, vid_out_norm=True),
        "7b": dict(num_layers=36, mlp_type="swiglu", mm_layers=10, version_7b=True),
        "7b_separate": dict(num_layers=36, mlp_type="normal", mm_layers=36, version_7b=True),
    }[variant]
    model = ref.NaDiT(norm_eps=1e-5, vid_dim=32, heads=2, head_dim=16, rope_dim=12, **settings)
    model.load_state_dict(sd, strict=True)
    return model.eval()


WORKFLOW_SEED = 42
WORKFLOW_TILE, WORKFLOW_OVERLAP = 512, 128  # the template's VAEEncodeTiled / VAEDecodeTiled


def upscale_graph(ref, variant: str, sd: dict) -> dict:
    """LoadImage -> ResizeImageMaskNode (x1, lanczos) -> SeedVR2Preprocess -> VAEEncodeTiled -> SeedVR2Conditioning
    + KSampler (the variant's transformer) -> VAEDecodeTiled -> SeedVR2PostProcessing (none) -> SaveImage, as ComfyUI runs it."""
    import nodes_seedvr_ref as nodes_ref
    import numpy as np
    import seedvr_vae_ref
    from PIL import Image
    from record_comfyui_seedvr2_vae import WIDTHS

    from comfy_bridge.cli.demo_models import write_example_image
    from nodes.models.seedvr2_demo import build_demo_seedvr2

    with tempfile.TemporaryDirectory() as tmp:
        write_example_image(Path(tmp) / "example.png")
        image = torch.from_numpy(np.array(Image.open(Path(tmp) / "example.png").convert("RGB"))).float()[None] / 255.0
        (vae_path,) = build_demo_seedvr2(Path(tmp))
        vae = seedvr_vae_ref.VideoAutoencoderKLWrapper(WIDTHS)
        vae.load_state_dict({k: v.float() for k, v in load_file(vae_path).items()}, strict=True)
    vae.eval()
    # lanczos at the same size: PIL's copy of the 8-bit values (comfy.utils.lanczos' round trip)
    image = torch.from_numpy(np.clip(255.0 * image.numpy(), 0, 255).astype(np.uint8).astype(np.float32) / 255.0)
    padded = nodes_ref.preprocess(image)[0]
    x = (padded * 2.0 - 1.0).movedim(-1, 0)[None]
    latent = vae.comfy_format_encoded(
        vae.encode_tiled(x, tile_x=WORKFLOW_TILE, tile_y=WORKFLOW_TILE, overlap=WORKFLOW_OVERLAP)
    )
    positive, _ = nodes_ref.conditioning(sd["positive_conditioning"], sd["negative_conditioning"], latent)
    model = reference_model(ref, variant, sd)
    noise = torch.randn(latent.size(), dtype=latent.dtype, generator=torch.manual_seed(WORKFLOW_SEED))
    sigma = 1.0  # ModelSamplingDiscreteFlow at shift 1: the last of its 1000 sigmas; the simple schedule's 1 step
    x_t = sigma * noise + (1.0 - sigma) * latent
    v = model(x_t, torch.tensor([sigma * 1000.0]), positive[0][0], condition=positive[0][1]["condition"],
              transformer_options={"cond_or_uncond": [0]})  # fmt: skip
    sampled = x_t - v * sigma  # euler to sigma 0 lands on the denoised latent
    t, o = WORKFLOW_TILE // 8, WORKFLOW_OVERLAP // 8
    decoded = vae.decode_tiled(sampled, tile_x=t, tile_y=t, overlap=o).add(1.0).div(2.0).clamp(0.0, 1.0).movedim(1, -1)
    decoded = decoded.reshape(-1, *decoded.shape[2:])
    out = nodes_ref.postprocess(decoded, image, "none")
    return {
        "tile": WORKFLOW_TILE,
        "overlap": WORKFLOW_OVERLAP,
        "seed": WORKFLOW_SEED,
        "latent": b64(sampled, MAX_RECORDED_VALUES),
        "image": png_rgb(out[0], MAX_RECORDED_VALUES),
    }


def main() -> None:
    folder, out = sys.argv[1:3]
    sys.path.insert(0, folder)
    import seedvr_dit_ref as ref

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        paths = build_demo_seedvr2_transformers(Path(tmp))
        files = {
            variant: {k: v.float() for k, v in load_file(p).items()} for variant, p in zip(TRANSFORMER_FILES, paths)
        }
        record: dict = {
            "files": {
                v: {"file": TRANSFORMER_FILES[v], "sha256": sha256(str(p))} for v, p in zip(TRANSFORMER_FILES, paths)
            }
        }
    files["7b_separate"] = {k: v.float() for k, v in tiny_dit_state_dict("7b_separate").items()}
    record["separate_sum"] = float(sum(v.double().sum() for v in files["7b_separate"].values()))
    record["cases"] = []
    with torch.no_grad():
        for variant, seed, frames, h, w, timestep in CASES:
            sd = files[variant]
            model = reference_model(ref, variant, sd)
            gen = torch.Generator().manual_seed(seed)
            x = torch.randn((1, 16, frames, h, w), generator=gen)
            latent = torch.randn((1, 16, frames, h, w), generator=gen)
            condition = torch.cat((latent, torch.ones_like(latent[:, :1])), dim=1)  # SeedVR2Conditioning's
            context = sd["positive_conditioning"][None]
            result = model(x, torch.tensor([timestep]), context, condition=condition,
                        transformer_options={"cond_or_uncond": [0]})  # fmt: skip
            record["cases"].append(
                {"variant": variant, "seed": seed, "shape": [1, 16, frames, h, w], "timestep": timestep,
                 "sum": float(x.double().sum() + latent.double().sum()), "out": b64(result, MAX_RECORDED_VALUES)}
            )  # fmt: skip
            print(variant, frames, h, w, float(result.abs().max()))
        record["workflows"] = {
            f"seedvr2_{variant}_upscale_image": upscale_graph(ref, variant, files[variant]) for variant in ("3b", "7b")
        }
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    write_json(out, record)


if __name__ == "__main__":
    main()
