"""Record what ComfyUI computes for Wan 2.2 14B Fun Camera (ComfyUI's WAN22_Camera: 36 input channels, the camera
control adapter, no CLIP image states) on wan-tiny's wan2.2_fun_camera_14B_tiny, as the fixture
tests/models/test_wan22_camera.py checks (tests/models/fixtures/comfyui_wan22_camera.json.xz).

Run inside ComfyUI 0.3.64's environment (it has WAN22_Camera; nothing of ComfyUI is copied here), after the tiny
files were written, with record_comfyui_wan.py's loaders and tiny-width wrappers:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<torchvision shim>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_wan22_camera.py \\
        /work/main/tests/models/fixtures/comfyui_wan22_camera.json.xz <models dir>

Recorded: WanCameraEmbedding ("Zoom Out", 48 x 32, 9 frames) into WanCameraImageToVideo with a seeded start image
(its positive conditioning: concat_latent_image, concat_mask, camera_conditions), then one evaluation of the model
through ComfyUI's WAN21_Camera (concat_cond: the 4 mask channels before the start latent, as in_dim 36 asks; and
apply_model at sigma 0.6 with the camera conditions), on seeded noise and text states."""

from __future__ import annotations

import sys
from pathlib import Path

OUT, MODELS = sys.argv[1:3]
sys.argv[1:] = [OUT, MODELS, "/nonexistent", "/nonexistent", "/nonexistent"]  # record_comfyui_wan's arguments
sys.path.insert(0, str(Path(__file__).resolve().parent))
import record_comfyui_wan as base  # it imports ComfyUI with --cpu: before any other ComfyUI module
import torch
from comfyui_recording import MAX_RECORDED_VALUES, write_json

MODEL = "diffusion_models/wan2.2_fun_camera_14B_tiny.safetensors"


def main() -> None:
    import comfy_extras.nodes_camera_trajectory as cam
    import comfy_extras.nodes_wan as wan
    import folder_paths

    torch.set_num_threads(1)
    base.tiny_widths()
    for folder in ("diffusion_models", "vae"):
        folder_paths.add_model_folder_path(folder, f"{MODELS}/{folder}", is_default=True)
    core = base.node_classes()
    (patcher,) = base.run_node(core["UNETLoader"], {"unet_name": MODEL.split("/")[1], "weight_dtype": "default"})
    assert type(patcher.model.model_config).__name__ == "WAN22_Camera", type(patcher.model.model_config)
    # 0.3.64's Wan VAE has the released base width fixed (0.10.0 reads it from the file): the tiny file's is given
    import comfy.ldm.wan.vae
    import comfy.utils

    vae_dim = comfy.utils.load_torch_file(f"{MODELS}/{base.FILES['vae']}")["encoder.conv1.weight"].shape[0]
    wan_vae = comfy.ldm.wan.vae.WanVAE
    comfy.ldm.wan.vae.WanVAE = lambda **cfg: wan_vae(**{**cfg, "dim": vae_dim})
    (vae,) = base.run_node(core["VAELoader"], {"vae_name": base.FILES["vae"].split("/")[1]})
    context = base.seeded(20, 1, 512, 32)
    cond = [[context, {}]]
    start = torch.rand(1, 50, 70, 3, generator=torch.Generator().manual_seed(21))
    emb = base.run_node(cam.WanCameraEmbedding, {"camera_pose": "Zoom Out", "width": 48, "height": 32, "length": 9})[0]
    pos, _, latent = base.run_node(
        wan.WanCameraImageToVideo,
        {
            "positive": cond,
            "negative": cond,
            "vae": vae,
            "width": 48,
            "height": 32,
            "length": 9,
            "batch_size": 1,
            "start_image": start,
            "camera_conditions": emb,
        },
    )
    opts = pos[0][1]
    x = base.seeded(40, *latent["samples"].shape)
    with torch.no_grad():
        concat = patcher.model.concat_cond(
            noise=x,
            device=torch.device("cpu"),
            concat_latent_image=opts["concat_latent_image"],
            concat_mask=opts["concat_mask"],
        )
        denoised = patcher.model.apply_model(
            x, torch.tensor([0.6]), c_concat=concat, c_crossattn=context, camera_conditions=opts["camera_conditions"]
        )
    out = {
        "source": "ComfyUI 0.3.64 (a125cd84)",
        "recorded_by": "scripts/record_comfyui_wan22_camera.py",
        "files": {
            k: {"path": v, "sha256": base.sha256(f"{MODELS}/{v}")}
            for k, v in {"model": MODEL, "vae": base.FILES["vae"]}.items()
        },
        "context": base.b64(context),
        "start_image": base.b64(start),
        "node": {
            "latent_shape": list(latent["samples"].shape),
            **{
                k: base.b64(opts[k], MAX_RECORDED_VALUES)
                for k in ("concat_latent_image", "concat_mask", "camera_conditions")
            },
        },
        "step": {
            "x": base.b64(x),
            "sigma": 0.6,
            "concat": base.b64(concat, MAX_RECORDED_VALUES),
            "denoised": base.b64(denoised, MAX_RECORDED_VALUES),
        },
    }
    write_json(OUT, out)


if __name__ == "__main__":
    main()
