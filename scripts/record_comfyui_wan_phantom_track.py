"""Record what ComfyUI 0.3.64 computes with wan-tiny (nodes/models/wan_demo.py) for WanPhantomSubjectToVideo and
WanTrackToVideo, as tests/models/test_wan_phantom_track.py checks it
(tests/models/fixtures/comfyui_wan_phantom_track.json.xz).

Run inside ComfyUI 0.3.64's environment (docs: /work/shared/reference/running-real-comfyui.md), after the tiny
files were written (nodes.models.wan_demo.build_demo_wan), reusing scripts/record_comfyui_wan.py's loaders and
tiny-size wrappers (and giving the Wan 2.1 VAE the tiny file's base width, which 0.3.64 fixes):

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<torchvision shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_wan_phantom_track.py \\
        /work/main/tests/models/fixtures/comfyui_wan_phantom_track.json.xz <models dir> <input dir> \\
        /work/main/workflows_json/wan21_ati.json /work/main/workflows_json/wan21_phantom.json

Recorded: WanPhantomSubjectToVideo's three conditionings (their time_dim_concat) for two subject images of other
sizes, one evaluation of the Wan 2.1 text-to-video model through ComfyUI's BaseModel with the positive's
subject frames (WAN21.extra_conds' time_dim_concat, apply_model), and KSampler (euler, 2 steps, cfg 3.5) with the
positive and either negative; WanTrackToVideo's concat_mask and
concat_latent_image for track cases (one track, several tracks, a batch of two samples of their own tracks, a track
longer than 121 points, single-quoted JSON, batch_size 2 from one sample's tracks, another temperature and topk)
and its fallback with no tracks (WanImageToVideo's conditioning); and one evaluation of the Wan 2.1 image-to-video
model on the tracked conditioning with seeded CLIP vision states (concat_cond, apply_model); the Wan ATI
template's workflow (workflows_json/wan21_ati.json, scripts/wan_ati_template_workflow.py) run node by node with
ComfyUI's classes as record_comfyui_wan.run_workflow runs the others: VAEDecode's frames (a strided grid of them);
likewise workflows_json/wan21_phantom.json (Wan 2.1 text-to-video with two subject images: example.png and its
inverse; KSampler with the image-free negative).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT, MODELS, INPUT, WORKFLOW, PHANTOM_WORKFLOW = sys.argv[1:6]
sys.argv[1:] = [OUT, MODELS, INPUT, "/nonexistent", "/nonexistent"]  # record_comfyui_wan's arguments
sys.path.insert(0, str(Path(__file__).resolve().parent))
import record_comfyui_wan as base  # it imports ComfyUI with --cpu: before any other ComfyUI module
import torch
from comfyui_recording import MAX_RECORDED_VALUES, png_rgb, write_json

SOURCE = "ComfyUI 0.3.64 (Comfy-Org/ComfyUI a125cd84)"


def track(x0: float, y0: float, dx: float, dy: float, n: int) -> list[dict]:
    return [{"x": round(x0 + dx * i, 2), "y": round(y0 + dy * i, 2)} for i in range(n)]


TRACK_CASES = {
    # name: (tracks text, width, height, length, batch_size, temperature, topk)
    "one_track": (json.dumps(track(10, 8, 1.5, 0.5, 60)), 48, 32, 9, 1, 220.0, 2),
    "three_tracks": (
        json.dumps([track(10, 8, 1.5, 0.5, 121), track(40, 20, -1, 0.25, 90), track(24, 16, 0, 0, 30)]),
        48,
        32,
        13,
        1,
        3.5,
        2,
    ),
    "two_samples": (
        json.dumps([[track(5, 5, 1, 1, 121)], [track(30, 10, -0.5, 0.5, 121), track(12, 28, 0.5, -0.5, 121)]]),
        32,
        32,
        9,
        2,
        50.0,
        1,
    ),
    "long_single_quotes": (json.dumps(track(3, 30, 0.3, -0.2, 150)).replace('"', "'"), 64, 32, 5, 1, 220.0, 10),
    "batch_from_one": (
        json.dumps([track(10, 8, 1.5, 0.5, 121), track(20, 24, -1, -0.5, 121)]),
        48,
        32,
        9,
        2,
        10.0,
        3,
    ),
    "no_tracks": ("[]", 48, 32, 9, 1, 220.0, 2),
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
    for folder in ("diffusion_models", "text_encoders", "vae", "clip_vision"):
        folder_paths.add_model_folder_path(folder, f"{MODELS}/{folder}", is_default=True)
    core = base.node_classes()
    (vae,) = base.run_node(core["VAELoader"], {"vae_name": base.FILES["vae"].split("/")[1]})
    unet = {
        part: base.run_node(
            core["UNETLoader"], {"unet_name": base.FILES[part].split("/")[1], "weight_dtype": "default"}
        )[0]
        for part in ("t2v", "i2v_21")
    }
    context = base.seeded(20, 1, 24, 32)  # a short prompt keeps the fixture small
    cond = [[context, {}]]
    negative = [[base.seeded(19, 1, 24, 32), {}]]
    subjects = torch.rand(2, 24, 40, 3, generator=torch.Generator().manual_seed(21))
    start = torch.rand(2, 40, 56, 3, generator=torch.Generator().manual_seed(22))
    out = {
        "source": SOURCE,
        "recorded_by": "scripts/record_comfyui_wan_phantom_track.py",
        "files": {
            k: {"path": base.FILES[k], "sha256": base.sha256(f"{MODELS}/{base.FILES[k]}")}
            for k in ("vae", "t2v", "i2v_21")
        },
        "context": base.b64(context),
        "negative": base.b64(negative[0][0]),
        "subjects": base.b64(subjects),
        "start_image": base.b64(start),
    }

    pos, neg_text, neg_img, latent = base.run_node(
        wan.WanPhantomSubjectToVideo,
        {
            "positive": cond,
            "negative": negative,
            "vae": vae,
            "width": 48,
            "height": 32,
            "length": 9,
            "batch_size": 2,
            "images": subjects,
        },
    )
    tdc = pos[0][1]["time_dim_concat"]
    x = base.seeded(30, 2, 16, latent["samples"].shape[2], 4, 6)
    model = unet["t2v"].model
    extra = model.extra_conds(noise=x, device=torch.device("cpu"), time_dim_concat=tdc)
    denoised = model.apply_model(
        x,
        torch.tensor([0.6, 0.6]),
        c_crossattn=context.repeat(2, 1, 1),
        time_dim_concat=extra["time_dim_concat"].cond.repeat(2, 1, 1, 1, 1),
    )
    out["phantom"] = {
        "latent_shape": list(latent["samples"].shape),
        "positive": base.b64(tdc),
        "negative_text": base.b64(neg_text[0][1]["time_dim_concat"]),
        "negative_img_text": base.b64(neg_img[0][1]["time_dim_concat"]),
        "negative_text_context_is_negative": bool(torch.equal(neg_text[0][0], negative[0][0])),
        "step": {"x": base.b64(x), "sigma": 0.6, "denoised": base.b64(denoised)},
    }
    # the sampler's path: KSampler with the positive and the image-free negative (both carry subject frames)
    for name, negative_side in (("ksampler", neg_img), ("ksampler_negative_text", neg_text)):
        (sampled,) = base.run_node(
            core["KSampler"],
            {
                "model": unet["t2v"],
                "seed": 42,
                "steps": 2,
                "cfg": 3.5,
                "sampler_name": "euler",
                "scheduler": "simple",
                "positive": pos,
                "negative": negative_side,
                "latent_image": latent,
                "denoise": 1.0,
            },
        )
        out["phantom"][name] = base.b64(sampled["samples"])

    out["track"] = {}
    for name, (tracks, width, height, length, batch, temperature, topk) in TRACK_CASES.items():
        p, n, lat = base.run_node(
            wan.WanTrackToVideo,
            {
                "positive": cond,
                "negative": cond,
                "vae": vae,
                "tracks": tracks,
                "width": width,
                "height": height,
                "length": length,
                "batch_size": batch,
                "temperature": temperature,
                "topk": topk,
                "start_image": start,
            },
        )
        opts = p[0][1]
        out["track"][name] = {
            "args": [tracks, width, height, length, batch, temperature, topk],
            "latent_shape": list(lat["samples"].shape),
            "opts": {k: base.b64(v) for k, v in opts.items() if isinstance(v, torch.Tensor)},
            "neg_equal": all(torch.equal(opts[k], n[0][1][k]) for k in opts if isinstance(opts[k], torch.Tensor)),
        }
    rec = out["track"]["three_tracks"]
    p, _, lat = base.run_node(
        wan.WanTrackToVideo,
        {
            "positive": cond,
            "negative": cond,
            "vae": vae,
            **dict(zip(["tracks", "width", "height", "length", "batch_size", "temperature", "topk"], rec["args"])),
            "start_image": start,
        },
    )
    opts = p[0][1]
    x = base.seeded(31, *lat["samples"].shape)
    model = unet["i2v_21"].model
    concat = model.concat_cond(
        noise=x,
        device=torch.device("cpu"),
        concat_latent_image=opts["concat_latent_image"],
        concat_mask=opts["concat_mask"],
    )
    text = base.seeded(23, 1, 512, 32)  # umt5's 512 rows: the image-to-video model's cross attention expects them
    # with CLIP vision states, as the ATI template gives them (the tiny image embedding's width)
    clip_fea = base.seeded(24, 1, 257, model.diffusion_model.img_emb.proj[0].weight.shape[0])
    denoised = model.apply_model(x, torch.tensor([0.6]), c_concat=concat, c_crossattn=text, clip_fea=clip_fea)
    rec["step"] = {
        "x": base.b64(x),
        "sigma": 0.6,
        "context": base.b64(text),
        "clip_fea": base.b64(clip_fea),
        "concat": base.b64(concat),
        "denoised": base.b64(denoised),
    }
    # the ATI template (workflows_json/wan21_ati.json) node by node with ComfyUI's classes, its frames thinned
    import comfy_extras.nodes_primitive as primitive

    folder_paths.set_input_directory(INPUT)
    import nodes

    classes = {
        **core,
        "WanTrackToVideo": wan.WanTrackToVideo,
        "PrimitiveStringMultiline": primitive.StringMultiline,
        "WanPhantomSubjectToVideo": wan.WanPhantomSubjectToVideo,
        "ImageBatch": nodes.ImageBatch,
    }
    base.node_classes = lambda: classes
    base.png_rgb = lambda image: png_rgb(image, MAX_RECORDED_VALUES)
    with open(WORKFLOW) as f:
        prompt = json.load(f)
    out["workflow_ati"] = {"prompt": prompt, **base.run_workflow(prompt)}
    with open(PHANTOM_WORKFLOW) as f:
        prompt = json.load(f)
    out["workflow_phantom"] = {"prompt": prompt, **base.run_workflow(prompt)}
    write_json(OUT, out)


if __name__ == "__main__":
    main()
