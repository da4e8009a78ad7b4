"""Record what ComfyUI 0.3.64 computes for WanAnimateToVideo with wan-tiny's Wan 2.1 VAE (nodes/models/wan_demo.py),
as tests/models/test_wan_animate.py checks it (tests/models/fixtures/comfyui_wan_animate.json.xz).

Run inside ComfyUI 0.3.64's environment (/work/shared/reference/running-real-comfyui.md) after the tiny files were
written (nodes.models.wan_demo.build_demo_wan), with scripts/record_comfyui_wan.py's loaders:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<torchvision shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_wan_animate.py /work/main/tests/models/fixtures/comfyui_wan_animate.json.xz \\
        <models dir>

Recorded, per case (seeded inputs of other sizes than the output's): the node's six outputs, the positive's tensors
(the face pixels, 512x512 per frame, as a strided grid), which of the negative's equal them and its face pixels, and for the first case one evaluation of the
Wan 2.1 image-to-video model on its concat (concat_cond, apply_model with seeded text and CLIP vision states).
"""

from __future__ import annotations

import sys
from pathlib import Path

OUT, MODELS = sys.argv[1:3]
sys.argv[1:] = [OUT, MODELS, "/nonexistent", "/nonexistent", "/nonexistent"]  # record_comfyui_wan's arguments
sys.path.insert(0, str(Path(__file__).resolve().parent))
import record_comfyui_wan as base  # it imports ComfyUI with --cpu: before any other ComfyUI module
import torch
from comfyui_recording import MAX_RECORDED_VALUES, write_json

SOURCE = "ComfyUI 0.3.64 (Comfy-Org/ComfyUI a125cd84)"


FACE_VALUES = 4096  # the face pixels (512x512 per frame) kept as a strided grid of this many values


def rand(seed: int, *shape: int) -> torch.Tensor:
    """Seeded pixels in 8-bit steps, as loaded images are (and small once compressed)."""
    return (torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) * 255).round() / 255


def recorded(key: str, value: torch.Tensor | None) -> dict | None:
    if value is None:
        return None
    return base.b64(value, FACE_VALUES if key == "face_video_pixels" else MAX_RECORDED_VALUES)


def cases() -> dict:
    """name -> (widgets, optional inputs)."""
    size = {"width": 48, "height": 32, "length": 9, "batch_size": 1}
    return {
        "everything": (
            {**size, "continue_motion_max_frames": 5, "video_frame_offset": 0},
            {
                "reference_image": rand(1, 1, 20, 28, 3),
                "pose_video": rand(2, 6, 16, 24, 3),
                "face_video": rand(3, 4, 12, 12, 3),
                "background_video": rand(4, 12, 16, 24, 3),
                "character_mask": (rand(5, 12, 10, 15) > 0.5).float(),
            },
        ),
        "continued_from_offset": (
            {**size, "length": 13, "batch_size": 2, "continue_motion_max_frames": 5, "video_frame_offset": 9},
            {
                "reference_image": rand(6, 1, 16, 24, 3),
                "continue_motion": rand(7, 7, 15, 25, 3),
                "pose_video": rand(8, 16, 16, 24, 3),
                "face_video": rand(9, 5, 8, 8, 3),
                "background_video": rand(10, 15, 18, 22, 3),
                "character_mask": rand(11, 1, 8, 12),
            },
        ),
        "offset_past_the_videos": (
            {**size, "continue_motion_max_frames": 1, "video_frame_offset": 30},
            {
                "continue_motion": rand(12, 3, 16, 24, 3),
                "pose_video": rand(13, 4, 16, 24, 3),
                "face_video": rand(14, 4, 8, 8, 3),
                "character_mask": rand(15, 4, 8, 12),
            },
        ),
        "nothing": ({**size, "continue_motion_max_frames": 5, "video_frame_offset": 0}, {}),
    }


def main() -> None:
    import comfy.ldm.wan.vae
    import comfy.utils
    import comfy_extras.nodes_wan as wan
    import folder_paths

    torch.set_num_threads(1)
    base.tiny_widths()
    # 0.3.64 fixes the Wan 2.1 VAE's base width (96): the tiny file's is read from it
    vae_dim = comfy.utils.load_torch_file(f"{MODELS}/{base.FILES['vae']}")["encoder.conv1.weight"].shape[0]
    wan_vae = comfy.ldm.wan.vae.WanVAE
    comfy.ldm.wan.vae.WanVAE = lambda **cfg: wan_vae(**{**cfg, "dim": vae_dim})
    for folder in ("diffusion_models", "vae"):
        folder_paths.add_model_folder_path(folder, f"{MODELS}/{folder}", is_default=True)
    core = base.node_classes()
    (vae,) = base.run_node(core["VAELoader"], {"vae_name": base.FILES["vae"].split("/")[1]})
    context = base.seeded(20, 1, 8, 32)
    out = {
        "source": SOURCE,
        "recorded_by": "scripts/record_comfyui_wan_animate.py",
        "files": {
            k: {"path": base.FILES[k], "sha256": base.sha256(f"{MODELS}/{base.FILES[k]}")} for k in ("vae", "i2v_21")
        },
        "context": base.b64(context),
        "cases": {},
    }
    for name, (widgets, images) in cases().items():
        cond = [[context, {}]]
        pos, neg, latent, trim_latent, trim_image, offset = base.run_node(
            wan.WanAnimateToVideo, {"positive": cond, "negative": cond, "vae": vae, **widgets, **images}
        )
        out["cases"][name] = {
            "widgets": widgets,
            "inputs": {k: base.b64(v) for k, v in images.items()},
            "latent_shape": list(latent["samples"].shape),
            "ints": [trim_latent, trim_image, offset],
            "positive": {k: recorded(k, v) for k, v in pos[0][1].items() if isinstance(v, torch.Tensor)},
            # the negative's tensors are the positive's but for its face pixels
            "negative_same": sorted(
                k for k, v in neg[0][1].items() if isinstance(v, torch.Tensor) and torch.equal(v, pos[0][1][k])
            ),
            "negative_face": recorded("face_video_pixels", neg[0][1].get("face_video_pixels")),
        }
        if name == "everything":
            (patcher,) = base.run_node(
                core["UNETLoader"], {"unet_name": base.FILES["i2v_21"].split("/")[1], "weight_dtype": "default"}
            )
            model = patcher.model
            opts = pos[0][1]
            x = base.seeded(31, *latent["samples"].shape)
            text = base.seeded(23, 1, 512, 32)
            clip_fea = base.seeded(24, 1, 257, model.diffusion_model.img_emb.proj[0].weight.shape[0])
            concat = model.concat_cond(
                noise=x,
                device=torch.device("cpu"),
                concat_latent_image=opts["concat_latent_image"],
                concat_mask=opts["concat_mask"],
            )
            denoised = model.apply_model(x, torch.tensor([0.6]), c_concat=concat, c_crossattn=text, clip_fea=clip_fea)
            out["step"] = {
                "x": base.b64(x),
                "sigma": 0.6,
                "context": base.b64(text),
                "clip_fea": base.b64(clip_fea),
                "concat": base.b64(concat),
                "denoised": base.b64(denoised),
            }
    write_json(OUT, out)


if __name__ == "__main__":
    main()
