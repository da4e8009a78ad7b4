"""Record what ComfyUI 0.3.64 (commit a125cd84) computes for Stable Video Diffusion on the tiny checkpoint
(checkpoints/svd_xt-tiny.safetensors, nodes/models/svd_demo.py), as tests/models/test_svd.py checks it
(tests/models/fixtures/comfyui_svd.json.xz).

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<torchvision shim>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_svd.py <fixture> <workspace> [<image.pt> <workflow fixture>]

With the last two arguments it also records the Text to Image to Video template's video half
(tests/models/fixtures/comfyui_svd_workflow.json.xz, tests/e2e/test_svd_workflow.py) from the image its SDXL half
makes here, which `python scripts/svd_workflow.py <workspace> --init-image <image.pt>` writes first.

ComfyUI fixes the released sizes: supported_models.SVD_img2vid matches only SVD's widths (320 channels, 1024-wide
context), comfy/sd.py builds the temporal VAE at SVD's (128 channels, [1, 2, 4, 4], two ResBlocks a level) and
clip_vision picks its configs by depth (ViT-H: 32 layers). This script tells those three the tiny file's sizes and
changes nothing else: ImageOnlyCheckpointLoader, SVD_img2vid_Conditioning, model_base.SVD_img2vid (its ADM,
c_concat and frame count), the VideoUNet, V_PREDICTION_EDM sampling, the temporal decoder and CLIP vision encoder
are ComfyUI's. Recorded: which model config ComfyUI builds; the CLIP image embeddings and VAE encoding of a seeded
image; the denoised output of one evaluation for several frame counts, sizes, sigmas and ADM values (batches of one
and two videos, with and without the image latent); VAE decoding of seeded latents; SVD_img2vid_Conditioning's
conditionings and latent; and KSampler on its output (through VideoLinearCFGGuidance) decoded, as the template's
video half runs it."""

from __future__ import annotations

import json
import sys
import tempfile

import torch
from comfyui_recording import (
    MAX_RECORDED_VALUES,
    b64,
    comfyui_on_cpu,
    node_classes,
    run_node,
    run_prompt,
    sha256,
    write_json,
)

OUT, WORKSPACE = sys.argv[1:3]
INIT_IMAGE, WORKFLOW_OUT = (sys.argv[3:5] + [None, None])[:2]  # the template's run, when given
comfyui_on_cpu()
import comfy.clip_vision  # noqa: E402
import comfy.ldm.modules.diffusionmodules.model as ldm_vae  # noqa: E402
import comfy.ldm.modules.temporal_ae as temporal_ae  # noqa: E402
import comfy.supported_models  # noqa: E402
import comfy.utils  # noqa: E402
import folder_paths  # noqa: E402

COMMIT = "a125cd84"
CHECKPOINT = "checkpoints/svd_xt-tiny.safetensors"
PREFIX = "model.diffusion_model."
VISION = {  # the demo's tiny CLIP vision tower (nodes/models/demo.py tiny_clip_vision)
    "hidden_act": "quick_gelu",
    "hidden_size": 32,
    "image_size": 224,
    "intermediate_size": 64,
    "layer_norm_eps": 1e-05,
    "model_type": "clip_vision_model",
    "num_attention_heads": 16,
    "num_channels": 3,
    "num_hidden_layers": 2,
    "patch_size": 14,
}
# (name, videos, frames, latent h, w, sigma, fps, motion bucket, augmentation, with the image latent)
STEP_CASES = [
    ("one_video", 1, 3, 8, 12, 1.7, 6, 127, 0.0, True),
    ("cond_and_uncond", 2, 4, 6, 8, 35.0, 10, 127, 0.0, True),
    ("high_sigma_no_image", 1, 2, 8, 8, 650.0, 6, 40, 0.0, False),
    ("low_sigma_motion", 1, 5, 4, 6, 0.01, 24, 300, 0.5, True),
]
DECODE_CASES = [(1, 4, 6), (3, 4, 4), (6, 2, 4)]  # frames, latent h, w
CONDITIONING = {"width": 64, "height": 48, "video_frames": 4, "motion_bucket_id": 100, "fps": 8}
KEPT_VALUES = 8192  # what the fixture keeps of each decoded output (a strided grid): it stays small
REPO = "/work/main"
WORKFLOW = "txt_to_image_to_video"
FRAMES_NODE = "900"  # the SaveImage added beside the template's SaveVideo
SAMPLE = {"seed": 3, "steps": 3, "cfg": 2.5, "sampler_name": "euler", "scheduler": "karras", "min_cfg": 1.0}


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def tiny_sizes(sd: dict) -> dict:
    """Tell ComfyUI's SVD model config, temporal VAE and CLIP vision loader the tiny file's sizes."""
    import comfy.model_detection

    unet_config = comfy.model_detection.detect_unet_config(sd, PREFIX)
    svd = comfy.supported_models.SVD_img2vid
    svd.unet_config = {
        **svd.unet_config,
        "model_channels": unet_config["model_channels"],
        "transformer_depth": unet_config["transformer_depth"],
        "context_dim": unet_config["context_dim"],
    }
    vae = {k[len("first_stage_model.") :]: v for k, v in sd.items() if k.startswith("first_stage_model.")}
    conv_in = vae["encoder.conv_in.weight"].shape[0]
    levels = len({k.split(".")[2] for k in vae if k.startswith("encoder.down.")})
    sizes = {
        "ch": conv_in,
        "ch_mult": [vae[f"encoder.down.{i}.block.0.conv1.weight"].shape[0] // conv_in for i in range(levels)],
        "num_res_blocks": len({k.split(".")[4] for k in vae if k.startswith("encoder.down.0.block.")}),
    }
    for module, name in ((ldm_vae, "Encoder"), (temporal_ae, "VideoDecoder")):
        cls = getattr(module, name)
        setattr(module, name, lambda cls=cls, **kw: cls(**{**kw, **sizes}))
    load = comfy.clip_vision.load_clipvision_from_sd

    def load_tiny(state_dict, prefix="", convert_keys=False):
        converted = comfy.clip_vision.convert_to_transformers(state_dict, prefix) if convert_keys else state_dict
        if "vision_model.encoder.layers.2.layer_norm1.weight" in converted:
            return load(state_dict, prefix, convert_keys)
        projection = converted["visual_projection.weight"].shape[0]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({**VISION, "projection_dim": projection}, f)
        model = comfy.clip_vision.ClipVisionModel(f.name)
        missing, _ = model.load_sd(converted)
        assert not missing, missing
        return model

    comfy.clip_vision.load_clipvision_from_sd = load_tiny
    return unet_config


def steps(model) -> list[dict]:
    out = []
    for i, (name, videos, frames, h, w, sigma, fps, motion, aug, with_image) in enumerate(STEP_CASES):
        n = videos * frames
        x = seeded(100 + i, n, 4, h, w)
        context = seeded(200 + i, videos, 1, model.model_config.unet_config["context_dim"])
        image = seeded(300 + i, 1, 4, h, w) if with_image else None
        adm = model.encode_adm(fps=fps, motion_bucket_id=motion, augmentation_level=aug)
        concat = torch.zeros_like(x) if image is None else comfy.utils.resize_to_batch_size(image, n)
        with torch.no_grad():
            denoised = model.apply_model(
                x,
                torch.full((n,), sigma),
                c_concat=concat,
                c_crossattn=context.repeat_interleave(frames, dim=0),
                y=adm.repeat(n, 1),
                num_video_frames=frames,
            )
        out.append(
            {
                "name": name,
                "videos": videos,
                "frames": frames,
                "sigma": sigma,
                "fps": fps,
                "motion_bucket_id": motion,
                "augmentation_level": aug,
                "x": b64(x),
                "context": b64(context),
                "image_latent": None if image is None else b64(image),
                "adm": b64(adm),
                "denoised": b64(denoised, MAX_RECORDED_VALUES),
            }
        )
    return out


def main() -> None:
    from comfy_extras import nodes_video_model

    torch.set_num_threads(1)
    path = f"{WORKSPACE}/models/{CHECKPOINT}"
    unet_config = tiny_sizes(comfy.utils.load_torch_file(path))
    folder_paths.add_model_folder_path("checkpoints", f"{WORKSPACE}/models/checkpoints", is_default=True)
    classes = node_classes(nodes_video_model)
    model, clip_vision, vae = run_node(classes["ImageOnlyCheckpointLoader"], {"ckpt_name": CHECKPOINT.split("/")[1]})
    image = torch.rand(1, 40, 56, 3, generator=torch.Generator().manual_seed(7))
    out = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_svd.py",
        "files": {CHECKPOINT: sha256(path)},
        "model_config": type(model.model.model_config).__name__,
        "model_type": model.model.model_type.name,
        "sigma_range": [float(model.model.model_sampling.sigma_min), float(model.model.model_sampling.sigma_max)],
        "unet_config": {k: v for k, v in unet_config.items() if isinstance(v, (int, float, str, bool, list))},
        "image": b64(image),
        "clip_vision": {"image_embeds": b64(clip_vision.encode_image(image).image_embeds)},
        "vae_encode": b64(vae.encode(image)),
        "steps": steps(model.model),
        "decode": [],
    }
    for i, (frames, h, w) in enumerate(DECODE_CASES):
        latent = seeded(400 + i, frames, 4, h, w)
        out["decode"].append({"latent": b64(latent), "images": b64(vae.decode(latent), KEPT_VALUES)})
    positive, negative, latent = run_node(
        classes["SVD_img2vid_Conditioning"],
        {"clip_vision": clip_vision, "init_image": image, "vae": vae, "augmentation_level": 0.0, **CONDITIONING},
    )
    out["conditioning"] = {
        "settings": CONDITIONING,
        "positive": b64(positive[0][0]),
        "positive_options": {k: v for k, v in positive[0][1].items() if k != "concat_latent_image"},
        "concat_latent_image": b64(positive[0][1]["concat_latent_image"]),
        "negative": b64(negative[0][0]),
        "negative_concat_latent_image": b64(negative[0][1]["concat_latent_image"]),
        "latent": b64(latent["samples"]),
    }
    (guided,) = run_node(classes["VideoLinearCFGGuidance"], {"model": model, "min_cfg": SAMPLE["min_cfg"]})
    settings = {k: v for k, v in SAMPLE.items() if k != "min_cfg"}
    (samples,) = run_node(
        classes["KSampler"],
        {
            "model": guided,
            "positive": positive,
            "negative": negative,
            "latent_image": latent,
            "denoise": 1.0,
            **settings,
        },
    )
    (frames,) = run_node(classes["VAEDecode"], {"samples": samples, "vae": vae})
    out["sampled"] = {"settings": SAMPLE, "latent": b64(samples["samples"]), "frames": b64(frames, KEPT_VALUES)}
    write_json(OUT, out)
    if INIT_IMAGE is not None:
        write_json(WORKFLOW_OUT, template_video_half(classes, torch.load(INIT_IMAGE)))


def template_video_half(classes: dict, init_image: torch.Tensor) -> dict:
    """The shipped txt_to_image_to_video workflow's video half run node by node with ComfyUI's classes from the
    image its SDXL half made here (scripts/svd_workflow.py --init-image: sdxl-tiny's byte-vocabulary text encoders
    have no ComfyUI counterpart), a SaveImage of the video's VAEDecode standing in for CreateVideo and SaveVideo."""
    with open(f"{REPO}/workflows_json/{WORKFLOW}.json") as f:
        prompt = json.load(f)
    (conditioning,) = [k for k, v in prompt.items() if v["class_type"] == "SVD_img2vid_Conditioning"]
    image_id = prompt[conditioning]["inputs"]["init_image"][0]
    (decode,) = [  # the video's VAEDecode: its VAE is the SVD checkpoint's
        k
        for k, v in prompt.items()
        if v["class_type"] == "VAEDecode" and prompt[v["inputs"]["vae"][0]]["class_type"] == "ImageOnlyCheckpointLoader"
    ]
    video_half = {"class_type": "SaveImage", "inputs": {"images": [decode, 0], "filename_prefix": "svd_frames"}}

    def given_image(class_type: str, inputs: dict):
        return (init_image,) if class_type == "RecordedImage" else None

    prompt = {**prompt, image_id: {"class_type": "RecordedImage", "inputs": {}}, FRAMES_NODE: video_half}
    return {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_svd.py",
        "files": {CHECKPOINT: sha256(f"{WORKSPACE}/models/{CHECKPOINT}")},
        "init_image": b64(init_image),
        "workflow": run_prompt(prompt, classes, given_image, max_values=MAX_RECORDED_VALUES),
    }


if __name__ == "__main__":
    main()
