"""Record what upstream ComfyUI 0.10.0 computes with wan-tiny's Fun models (nodes/models/wan_demo.py's
_fun_models), as the fixture tests/models/test_wan_fun.py checks (tests/models/fixtures/comfyui_wan_fun.json.xz).

Run like scripts/record_comfyui_wan.py (inside ComfyUI's environment, after the tiny files were written), whose
loaders and tiny-size wrappers it reuses:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_wan_fun.py /work/main/tests/models/fixtures/comfyui_wan_fun.json.xz \\
        <models dir> <input dir> /work/main/workflows_json/wan22_fun_inpaint.json \\
        /work/main/workflows_json/wan21_fun_camera.json

Recorded: the Fun nodes' outputs (WanFunControlToVideo with start image and control video,
Wan22FunControlToVideo with a control video on the Wan 2.1 and the Wan 2.2 VAE, WanFunInpaintToVideo with start
and end image) and, for each Fun model, one denoising evaluation through ComfyUI's model (its concat_cond,
with Wan 2.2 Fun Control's concat_mask_index, and apply_model) on its node's conditioning; WanCameraEmbedding on
presets and sizes (CAMERA_CASES), WanCameraImageToVideo, and one evaluation of the Fun Camera model with its
camera conditions and seeded CLIP vision states; the Wan 2.2 14B Fun
Inpaint template's workflow (workflows_json/wan22_fun_inpaint.json) run node by node with ComfyUI's classes as
record_comfyui_wan.run_workflow runs the others: VAEDecode's frames; likewise the Wan 2.1 Fun Camera v1.1
template's (workflows_json/wan21_fun_camera.json).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT, MODELS, INPUT, WORKFLOW, CAMERA_WORKFLOW = sys.argv[1:6]
sys.argv[1:] = [OUT, MODELS, INPUT, WORKFLOW, "/nonexistent"]  # record_comfyui_wan's arguments
sys.path.insert(0, str(Path(__file__).resolve().parent))
import record_comfyui_wan as base  # it imports ComfyUI with --cpu: before any other ComfyUI module
import torch
from comfyui_recording import write_json

FUN_FILES = {
    "fun_control": "diffusion_models/wan2.1_fun_control_1.3B_tiny.safetensors",
    "fun_inp": "diffusion_models/wan2.1_fun_inp_1.3B_tiny.safetensors",
    "fun22_control": "diffusion_models/wan2.2_fun_control_low_noise_14B_tiny.safetensors",
    "fun_camera": "diffusion_models/wan2.1_fun_camera_v1.1_1.3B_tiny.safetensors",
}
CAMERA_CASES = [
    ("Static", 32, 48, 9, {}),
    ("Pan Left", 48, 32, 5, {"speed": 2.0}),
    ("Zoom In", 64, 64, 13, {"fx": 0.3, "fy": 0.7, "cx": 0.4}),
    ("ClockWise (CW)", 48, 32, 9, {}),
    ("Anti Clockwise (ACW)", 16, 112, 1, {"speed": 0.5, "cy": 0.6}),
    ("Pan Up", 112, 16, 5, {}),
]


def fun_classes() -> dict:
    import comfy_extras.nodes_camera_trajectory as cam
    import comfy_extras.nodes_wan as wan

    return {
        **{
            n: getattr(wan, n)
            for n in ("WanFunControlToVideo", "Wan22FunControlToVideo", "WanFunInpaintToVideo", "WanCameraImageToVideo")
        },
        "WanCameraEmbedding": cam.WanCameraEmbedding,
    }


def step(patcher, opts: dict, context: torch.Tensor, shape: list[int], seed: int) -> dict:
    x = base.seeded(seed, *shape)
    concat = patcher.model.concat_cond(
        noise=x,
        device=torch.device("cpu"),
        **{k: opts[k] for k in ("concat_latent_image", "concat_mask", "concat_mask_index") if k in opts},
    )
    denoised = patcher.model.apply_model(x, torch.tensor([0.6]), c_concat=concat, c_crossattn=context)
    return {"x": base.b64(x), "sigma": 0.6, "concat": base.b64(concat), "denoised": base.b64(denoised)}


def record_camera(patcher, vae, cond, context, start) -> dict:
    import comfy_extras.nodes_camera_trajectory as cam
    import comfy_extras.nodes_wan as wan

    out = {"embeddings": []}
    for pose, width, height, length, extra in CAMERA_CASES:
        emb, *rest = base.run_node(
            cam.WanCameraEmbedding, {"camera_pose": pose, "width": width, "height": height, "length": length, **extra}
        )
        out["embeddings"].append(
            {"args": [pose, width, height, length, extra], "out": base.b64(emb), "rest": list(rest)}
        )
    emb = base.run_node(cam.WanCameraEmbedding, {"camera_pose": "Zoom Out", "width": 48, "height": 32, "length": 9})[0]
    pos, neg, latent = base.run_node(
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
    out["node"] = {
        "latent_shape": list(latent["samples"].shape),
        "neg_equal": all(torch.equal(opts[k], neg[0][1][k]) for k in opts),
        **{k: base.b64(v) for k, v in opts.items()},
    }
    x, clip_fea = base.seeded(40, *latent["samples"].shape), base.seeded(41, 1, 257, 32)
    concat = patcher.model.concat_cond(
        noise=x,
        device=torch.device("cpu"),
        concat_latent_image=opts["concat_latent_image"],
        concat_mask=opts["concat_mask"],
    )
    denoised = patcher.model.apply_model(
        x,
        torch.tensor([0.6]),
        c_concat=concat,
        c_crossattn=context,
        clip_fea=clip_fea,
        camera_conditions=opts["camera_conditions"],
    )
    out["step"] = {
        "x": base.b64(x),
        "sigma": 0.6,
        "clip_fea": base.b64(clip_fea),
        "concat": base.b64(concat),
        "denoised": base.b64(denoised),
    }
    return out


def main() -> None:
    import folder_paths

    torch.set_num_threads(1)
    base.tiny_widths()
    for folder in ("diffusion_models", "text_encoders", "vae", "loras"):
        folder_paths.add_model_folder_path(folder, f"{MODELS}/{folder}", is_default=True)
    folder_paths.set_input_directory(INPUT)
    core, fun = base.node_classes(), fun_classes()
    base.node_classes = lambda: {**core, **fun}  # run_workflow's classes, the Fun nodes with them
    patchers = {
        name: base.run_node(core["UNETLoader"], {"unet_name": path.split("/")[1], "weight_dtype": "default"})[0]
        for name, path in FUN_FILES.items()
    }
    (vae,) = base.run_node(core["VAELoader"], {"vae_name": base.FILES["vae"].split("/")[1]})
    (vae22,) = base.run_node(core["VAELoader"], {"vae_name": base.FILES["vae22"].split("/")[1]})
    context = base.seeded(20, 1, 512, 32)
    cond = [[context, {}]]
    start = torch.rand(1, 50, 70, 3, generator=torch.Generator().manual_seed(21))
    end = torch.rand(2, 30, 30, 3, generator=torch.Generator().manual_seed(22))
    control = torch.rand(7, 40, 40, 3, generator=torch.Generator().manual_seed(23))
    out = {
        "source": base.SOURCE,
        "recorded_by": "scripts/record_comfyui_wan_fun.py",
        "files": {
            k: {"path": v, "sha256": base.sha256(f"{MODELS}/{v}")}
            for k, v in {**FUN_FILES, "vae": base.FILES["vae"], "vae22": base.FILES["vae22"]}.items()
        },
        "context": base.b64(context),
        "start_image": base.b64(start),
        "end_image": base.b64(end),
        "control_video": base.b64(control),
    }
    cases = {
        "fun_control": ("WanFunControlToVideo", "fun_control", vae, {"start_image": start, "control_video": control}),
        "fun22_control": ("Wan22FunControlToVideo", "fun22_control", vae, {"control_video": control}),
        "fun22_control_vae22": ("Wan22FunControlToVideo", None, vae22, {"control_video": control}),
        "fun_inp": ("WanFunInpaintToVideo", "fun_inp", vae, {"start_image": start, "end_image": end}),
    }
    for seed, (name, (node, model, v, images)) in enumerate(cases.items()):
        pos, neg, latent = base.run_node(
            fun[node],
            {
                "positive": cond,
                "negative": cond,
                "vae": v,
                "width": 48,
                "height": 32,
                "length": 9,
                "batch_size": 1,
                **images,
            },
        )
        opts = pos[0][1]
        rec = {
            "node": node,
            "inputs": sorted(images),
            "latent_shape": list(latent["samples"].shape),
            "opts": {k: base.b64(t) for k, t in opts.items() if isinstance(t, torch.Tensor)},
            "mask_index": opts.get("concat_mask_index", 0),
            "neg_equal": all(torch.equal(opts[k], neg[0][1][k]) for k in opts if isinstance(opts[k], torch.Tensor)),
        }
        if model is not None:
            rec["step"] = step(patchers[model], opts, context, list(latent["samples"].shape), 30 + seed)
        out[name] = rec
    out["camera"] = record_camera(patchers["fun_camera"], vae, cond, context, start)
    with open(WORKFLOW) as f:
        prompt = json.load(f)
    out["workflow_fun_inpaint"] = {"prompt": prompt, **base.run_workflow(prompt)}
    with open(CAMERA_WORKFLOW) as f:
        prompt = json.load(f)
    out["workflow_fun_camera"] = {"prompt": prompt, **base.run_workflow(prompt)}
    write_json(OUT, out)


if __name__ == "__main__":
    main()
