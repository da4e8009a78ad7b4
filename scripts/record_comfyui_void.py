"""Record what ComfyUI's VOID nodes compute (comfy_extras/nodes_void.py, newer than every ComfyUI that runs here), as
tests/nodes/test_void_nodes.py checks (tests/nodes/fixtures/comfyui_void.json.xz).

The reference is the newest ComfyUI's own code (Comfy-Org/ComfyUI comfy_extras/nodes_void.py and
comfy_extras/void_noise_warp.py, read 2026-12-06), kept outside the repository in REF_DIR (nodes_void_ref.py,
void_noise_warp_ref.py), run on top of ComfyUI 0.10.0 (its samplers, CFGGuider, SamplerCustomAdvanced, VAE and
common_upscale are what that code builds on). VOID's own model (CogVideoX-Fun V1.5) is not in 0.10.0 nor here, so the
sampler is recorded on the tiny Wan 2.1 text-to-video file, whose model ignores the inpainting channels; the
conditioning node encodes through the tiny Wan 2.1 VAE (CogVideoX's VAE has the same 16 channels, 4x time and 8x
space). Nothing of ComfyUI is copied here. Run inside ComfyUI 0.10.0's environment, with models from
`nodes.models.wan_demo.build_demo_wan`:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:<REF_DIR>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_void.py \\
        /work/main/tests/nodes/fixtures/comfyui_void.json.xz <models dir>

Recorded: VOIDQuadmaskPreprocess on a seeded 0..1 mask video and on a 0..255 one (dilate 0 and 2);
VOIDInpaintConditioning's conds and latent on a seeded 11-frame video and mask (length 11 cut to 5: an even latent
frame count; resized to 48x32); SamplerCustomAdvanced with CFGGuider (cfg 3), BasicScheduler (simple, 3 steps) and
VOIDSampler, from RandomNoise and from VOIDWarpedNoiseSource of a seeded latent: both its outputs.
"""

from __future__ import annotations

import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, run_node, sha256, write_json

OUT, MODELS = sys.argv[1:3]
sys.argv[1:] = [OUT, MODELS, MODELS, OUT, OUT]  # record_comfyui_wan reads its own arguments on import
import record_comfyui_wan as wan  # noqa: E402  (the tiny widths for ComfyUI's Wan and umT5 classes)

comfyui_on_cpu()
import comfy.model_management  # noqa: E402
import folder_paths  # noqa: E402

comfy.model_management.intermediate_dtype = lambda: torch.float32  # newer than 0.10.0: float32 on a CPU
import nodes_void_ref as void  # noqa: E402  (the newest source's nodes, outside the repository)

SOURCE = "Comfy-Org/ComfyUI comfy_extras/nodes_void.py (read 2026-12-06) on ComfyUI 0.10.0"
FILES = {"t2v": wan.FILES["t2v"], "text_encoder": wan.FILES["text_encoder"], "vae": wan.FILES["vae"]}


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def conds(rows: list) -> list:
    return [{k: (b64(v) if isinstance(v, torch.Tensor) else v) for k, v in opts.items()} for _, opts in rows]


def main() -> None:
    wan.tiny_widths()
    for folder in ("diffusion_models", "text_encoders", "vae"):
        folder_paths.add_model_folder_path(folder, f"{MODELS}/{folder}")
    import comfy_extras.nodes_custom_sampler as cs

    import nodes

    gen = torch.Generator().manual_seed(7)
    unit = torch.rand(6, 16, 20, generator=gen)
    levels = torch.tensor([0.0, 20.0, 63.0, 100.0, 127.0, 200.0, 255.0])[
        torch.randint(0, 7, (6, 16, 20), generator=gen)
    ]
    quad = {
        "inputs": {"unit": b64(unit), "levels": b64(levels)},
        "cases": {
            f"{name}_dilate{d}": b64(run_node(void.VOIDQuadmaskPreprocess, {"mask": m, "dilate_width": d})[0])
            for name, m in (("unit", unit), ("levels", levels))
            for d in (0, 2)
        },
    }

    (vae,) = run_node(nodes.VAELoader, {"vae_name": FILES["vae"].split("/", 1)[1]})
    video = torch.rand(11, 40, 56, 3, generator=gen)
    mask = (torch.rand(11, 40, 56, generator=gen) > 0.6).float()
    text = [[seeded(1, 1, 5, 8), {"pooled_output": None}]]
    pos, neg, latent = run_node(
        void.VOIDInpaintConditioning,
        {
            "positive": text,
            "negative": text,
            "vae": vae,
            "video": video,
            "quadmask": mask,
            "width": 48,
            "height": 32,
            "length": 11,
            "batch_size": 2,
        },
    )
    inpaint = {
        "video": b64(video),
        "quadmask": b64(mask),
        "positive": conds(pos),
        "negative": conds(neg),
        "latent": b64(latent["samples"]),
    }

    (model,) = run_node(nodes.UNETLoader, {"unet_name": FILES["t2v"].split("/", 1)[1], "weight_dtype": "default"})
    (clip,) = run_node(
        nodes.CLIPLoader, {"clip_name": FILES["text_encoder"].split("/", 1)[1], "type": "wan", "device": "default"}
    )
    (positive,) = run_node(nodes.CLIPTextEncode, {"clip": clip, "text": "a red cube on a wooden table"})
    (negative,) = run_node(nodes.CLIPTextEncode, {"clip": clip, "text": ""})
    (guider,) = run_node(cs.CFGGuider, {"model": model, "positive": positive, "negative": negative, "cfg": 3.0})
    (sigmas,) = run_node(cs.BasicScheduler, {"model": model, "scheduler": "simple", "steps": 3, "denoise": 1.0})
    (sampler,) = run_node(void.VOIDSampler, {})
    empty = {"samples": torch.zeros(1, 16, 2, 4, 6)}
    warped = {"samples": seeded(11, 1, 16, 2, 4, 6)}
    sampling = {"sigmas": b64(sigmas), "warped": b64(warped["samples"]), "cases": {}}
    for name, noise in (
        ("random_noise", run_node(cs.RandomNoise, {"noise_seed": 43})[0]),
        ("warped_noise", run_node(void.VOIDWarpedNoiseSource, {"warped_noise": warped})[0]),
    ):
        out, denoised = run_node(
            cs.SamplerCustomAdvanced,
            {"noise": noise, "guider": guider, "sampler": sampler, "sigmas": sigmas, "latent_image": empty},
        )
        sampling["cases"][name] = {"output": b64(out["samples"]), "denoised": b64(denoised["samples"])}

    write_json(
        OUT,
        {
            "source": SOURCE,
            "sha256": {f: sha256(f"{MODELS}/{f}") for f in FILES.values()},
            "quadmask": quad,
            "inpaint": inpaint,
            "sampling": sampling,
        },
    )


if __name__ == "__main__":
    main()
