"""Record what upstream ComfyUI 0.10.0 computes for Wan 2.2 Fun Control's reference image with wan-tiny's Fun
Control file (diffusion_models/wan2.2_fun_control_low_noise_14B_tiny, its ref_conv patch embedding), as
tests/models/fixtures/comfyui_wan_fun_ref.json.xz (tests/models/test_wan_fun.py).

Run like scripts/record_comfyui_wan_fun.py (inside ComfyUI's environment, after the tiny files were written),
reusing scripts/record_comfyui_wan.py's loaders and tiny-size wrappers:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_wan_fun_ref.py /work/main/tests/models/fixtures/comfyui_wan_fun_ref.json.xz \\
        <models dir>

Recorded: Wan22FunControlToVideo with a control video and a reference image (its conditioning, the reference
latent included), and one denoising evaluation of the model through ComfyUI's BaseModel on it: concat_cond,
extra_conds (the reference latent's first frame in model space) and apply_model.
"""

from __future__ import annotations

import sys
from pathlib import Path

OUT, MODELS = sys.argv[1:3]
sys.argv[1:] = [OUT, MODELS, "/nonexistent", "/nonexistent", "/nonexistent"]  # record_comfyui_wan's arguments
sys.path.insert(0, str(Path(__file__).resolve().parent))
import record_comfyui_wan as base  # it imports ComfyUI with --cpu: before any other ComfyUI module
import torch
from comfyui_recording import write_json

MODEL = "diffusion_models/wan2.2_fun_control_low_noise_14B_tiny.safetensors"


def main() -> None:
    import comfy_extras.nodes_wan as wan
    import folder_paths

    torch.set_num_threads(1)
    base.tiny_widths()
    for folder in ("diffusion_models", "vae"):
        folder_paths.add_model_folder_path(folder, f"{MODELS}/{folder}", is_default=True)
    core = base.node_classes()
    (patcher,) = base.run_node(core["UNETLoader"], {"unet_name": MODEL.split("/")[1], "weight_dtype": "default"})
    (vae,) = base.run_node(core["VAELoader"], {"vae_name": base.FILES["vae"].split("/")[1]})
    context = base.seeded(50, 1, 512, 32)
    control = torch.rand(5, 40, 40, 3, generator=torch.Generator().manual_seed(51))
    ref_image = torch.rand(2, 50, 30, 4, generator=torch.Generator().manual_seed(52))  # the first, RGB, is used
    cond = [[context, {}]]
    pos, neg, latent = base.run_node(
        wan.Wan22FunControlToVideo,
        {
            "positive": cond,
            "negative": cond,
            "vae": vae,
            "width": 48,
            "height": 32,
            "length": 5,
            "batch_size": 1,
            "control_video": control,
            "ref_image": ref_image,
        },
    )
    opts = pos[0][1]
    x = base.seeded(53, *latent["samples"].shape)
    model = patcher.model
    concat = model.concat_cond(
        noise=x,
        device=torch.device("cpu"),
        **{k: opts[k] for k in ("concat_latent_image", "concat_mask", "concat_mask_index") if k in opts},
    )
    extra = model.extra_conds(noise=x, device=torch.device("cpu"), reference_latents=opts["reference_latents"])
    reference = extra["reference_latent"].cond
    denoised = model.apply_model(
        x, torch.tensor([0.6]), c_concat=concat, c_crossattn=context, reference_latent=reference
    )
    out = {
        "source": base.SOURCE,
        "recorded_by": "scripts/record_comfyui_wan_fun_ref.py",
        "files": {
            k: {"path": v, "sha256": base.sha256(f"{MODELS}/{v}")}
            for k, v in {"fun22_control": MODEL, "vae": base.FILES["vae"]}.items()
        },
        "context": base.b64(context),
        "control_video": base.b64(control),
        "ref_image": base.b64(ref_image),
        "latent_shape": list(latent["samples"].shape),
        "reference_latents": [base.b64(r) for r in opts["reference_latents"]],
        "neg_reference_latents": [base.b64(r) for r in neg[0][1]["reference_latents"]],
        "step": {
            "x": base.b64(x),
            "sigma": 0.6,
            "concat": base.b64(concat),
            "reference_latent": base.b64(reference),
            "denoised": base.b64(denoised),
        },
    }
    write_json(OUT, out)


if __name__ == "__main__":
    main()
