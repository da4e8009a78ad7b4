"""Record what ComfyUI computes for Wan 2.1 FLF2V 14B (first-last-frame-to-video: image-to-video's layout with
img_emb.emb_pos, ComfyUI's flf_pos_embed_token_number) on wan-tiny's wan2.1_flf2v_720p_14B_tiny, as the fixture
tests/models/test_wan21_flf2v.py checks (tests/models/fixtures/comfyui_wan21_flf2v.json.xz).

Run inside ComfyUI 0.3.64's environment (nothing of ComfyUI is copied here), after the tiny files were written, with
record_comfyui_wan.py's loaders and tiny-width wrappers (and the Wan VAE's tiny base width, which 0.3.64 fixes):

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<torchvision shim>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_wan21_flf2v.py \\
        /work/main/tests/models/fixtures/comfyui_wan21_flf2v.json.xz <models dir>

Recorded: WanFirstLastFrameToVideo (48 x 32, 9 frames) with seeded start and end images (its concat_latent_image
and concat_mask), then the model's concat_cond and apply_model at sigma 0.6 on seeded noise and text states, with
CLIP vision states of both frames side by side (514 tokens, what the node joins) and of the start frame alone (257)."""

from __future__ import annotations

import sys
from pathlib import Path

OUT, MODELS = sys.argv[1:3]
sys.argv[1:] = [OUT, MODELS, "/nonexistent", "/nonexistent", "/nonexistent"]  # record_comfyui_wan's arguments
sys.path.insert(0, str(Path(__file__).resolve().parent))
import record_comfyui_wan as base  # it imports ComfyUI with --cpu: before any other ComfyUI module
import torch
from comfyui_recording import MAX_RECORDED_VALUES, write_json

MODEL = "diffusion_models/wan2.1_flf2v_720p_14B_tiny.safetensors"
CLIP_TOKENS = {"both_frames": 514, "start_frame": 257}


def main() -> None:
    import comfy.ldm.wan.vae
    import comfy.utils
    import comfy_extras.nodes_wan as wan
    import folder_paths

    torch.set_num_threads(1)
    base.tiny_widths()
    vae_dim = comfy.utils.load_torch_file(f"{MODELS}/{base.FILES['vae']}")["encoder.conv1.weight"].shape[0]
    wan_vae = comfy.ldm.wan.vae.WanVAE
    comfy.ldm.wan.vae.WanVAE = lambda **cfg: wan_vae(**{**cfg, "dim": vae_dim})
    for folder in ("diffusion_models", "vae"):
        folder_paths.add_model_folder_path(folder, f"{MODELS}/{folder}", is_default=True)
    core = base.node_classes()
    (patcher,) = base.run_node(core["UNETLoader"], {"unet_name": MODEL.split("/")[1], "weight_dtype": "default"})
    assert patcher.model.diffusion_model.img_emb.emb_pos.shape[1] == 514
    (vae,) = base.run_node(core["VAELoader"], {"vae_name": base.FILES["vae"].split("/")[1]})
    context = base.seeded(20, 1, 512, 32)
    cond = [[context, {}]]
    start = torch.rand(1, 50, 70, 3, generator=torch.Generator().manual_seed(21))
    end = torch.rand(1, 30, 30, 3, generator=torch.Generator().manual_seed(22))
    pos, _, latent = base.run_node(
        wan.WanFirstLastFrameToVideo,
        {
            "positive": cond,
            "negative": cond,
            "vae": vae,
            "width": 48,
            "height": 32,
            "length": 9,
            "batch_size": 1,
            "start_image": start,
            "end_image": end,
        },
    )
    opts = pos[0][1]
    x = base.seeded(40, *latent["samples"].shape)
    steps = {}
    with torch.no_grad():
        concat = patcher.model.concat_cond(
            noise=x,
            device=torch.device("cpu"),
            concat_latent_image=opts["concat_latent_image"],
            concat_mask=opts["concat_mask"],
        )
        for i, (name, tokens) in enumerate(CLIP_TOKENS.items()):
            clip_fea = base.seeded(41 + i, 1, tokens, 32)
            denoised = patcher.model.apply_model(
                x, torch.tensor([0.6]), c_concat=concat, c_crossattn=context, clip_fea=clip_fea
            )
            steps[name] = {"clip_fea": base.b64(clip_fea), "denoised": base.b64(denoised, MAX_RECORDED_VALUES)}
    out = {
        "source": "ComfyUI 0.3.64 (a125cd84)",
        "recorded_by": "scripts/record_comfyui_wan21_flf2v.py",
        "files": {
            k: {"path": v, "sha256": base.sha256(f"{MODELS}/{v}")}
            for k, v in {"model": MODEL, "vae": base.FILES["vae"]}.items()
        },
        "context": base.b64(context),
        "start_image": base.b64(start),
        "end_image": base.b64(end),
        "node": {
            "latent_shape": list(latent["samples"].shape),
            **{k: base.b64(opts[k], MAX_RECORDED_VALUES) for k in ("concat_latent_image", "concat_mask")},
        },
        "x": base.b64(x),
        "sigma": 0.6,
        "concat": base.b64(concat, MAX_RECORDED_VALUES),
        "steps": steps,
    }
    write_json(OUT, out)


if __name__ == "__main__":
    main()
