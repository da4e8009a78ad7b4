"""Record what ComfyUI 0.3.64 computes for Wan 2.2 Fun 5B Control and InP on wan-tiny's
wan2.2_fun_control_5B_tiny / wan2.2_fun_inpaint_5B_tiny with the tiny Wan 2.2 VAE (48 latent channels, 1/16), as
the thin fixture tests/models/test_wan22_fun5b.py checks (tests/models/fixtures/comfyui_wan22_fun5b.json.xz).

Run inside ComfyUI 0.3.64's environment (nothing of ComfyUI is copied here), after the tiny files were written,
with record_comfyui_wan.py's loaders and tiny-width wrappers:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<torchvision shim>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_wan22_fun5b.py \\
        /work/main/tests/models/fixtures/comfyui_wan22_fun5b.json.xz <models dir> <input dir> \\
        /work/main/workflows_json/wan22_fun_control_5b.json /work/main/workflows_json/wan22_fun_inpaint_5b.json

Recorded (outputs only: the test draws the seeded inputs again, INPUTS below): the model config ComfyUI detects
for each file; Wan22FunControlToVideo (96 x 64, 5 frames) with a control video and a reference image, and
WanFunInpaintToVideo with a start and an end image: their positive conditioning (concat_latent_image, concat_mask,
concat_mask_index, the reference latent), then one evaluation of each model through ComfyUI's WAN22 (concat_cond:
the 4 mask channels where in_dim asks, extra_conds' reference latent, apply_model at sigma 0.6 to the denoised
prediction) on seeded noise and text states; and the 5B Fun Control and Fun Inpaint templates' workflows
(workflows_json/wan22_fun_{control,inpaint}_5b.json, scripts/wan22_fun5b_workflow.py; the input dir holds the
workspace's example.mp4 and example.png) each run node by node with ComfyUI's classes as record_comfyui_wan.run_workflow runs the
others: VAEDecode's frames."""

from __future__ import annotations

import base64
import importlib
import json
import sys
from pathlib import Path

OUT, MODELS, INPUT = sys.argv[1:4]
WORKFLOWS = dict(zip(("workflow_fun_control_5b", "workflow_fun_inpaint_5b"), sys.argv[4:6], strict=True))
sys.argv[1:] = [OUT, MODELS, INPUT, "/nonexistent", "/nonexistent"]  # record_comfyui_wan's arguments
sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np
import record_comfyui_wan as base  # it imports ComfyUI with --cpu: before any other ComfyUI module
import torch
from comfyui_recording import MAX_RECORDED_VALUES, thinned, write_json

FILES = {
    "control": "diffusion_models/wan2.2_fun_control_5B_tiny.safetensors",
    "inpaint": "diffusion_models/wan2.2_fun_inpaint_5B_tiny.safetensors",
    "vae22": base.FILES["vae22"],
}
# an even latent grid: 0.3.64 gives the reference tokens rotary slots of the padded grid
WIDTH, HEIGHT, LENGTH = 96, 64, 5


def inputs() -> dict[str, torch.Tensor]:
    """The seeded inputs (tests/models/test_wan22_fun5b.py draws them the same way)."""
    rand = lambda seed, *shape: torch.rand(*shape, generator=torch.Generator().manual_seed(seed))  # noqa: E731
    return {
        "context": torch.randn(1, 512, 32, generator=torch.Generator().manual_seed(60)),
        "control_video": rand(61, 5, 40, 56, 3),
        "ref_image": rand(62, 1, 50, 30, 3),
        "start_image": rand(63, 1, 40, 70, 3),
        "end_image": rand(64, 1, 52, 52, 3),
        "x": torch.randn(1, 48, 2, HEIGHT // 16, WIDTH // 16, generator=torch.Generator().manual_seed(65)),
    }


def main() -> None:
    import comfy_extras.nodes_wan as wan
    import folder_paths

    torch.set_num_threads(1)
    base.tiny_widths()
    for folder in ("diffusion_models", "vae"):
        folder_paths.add_model_folder_path(folder, f"{MODELS}/{folder}", is_default=True)
    folder_paths.add_model_folder_path("text_encoders", f"{MODELS}/text_encoders", is_default=True)
    folder_paths.set_input_directory(INPUT)
    core = base.node_classes()
    video = importlib.import_module("comfy_extras.nodes_video")
    fun_classes = {
        "Wan22FunControlToVideo": wan.Wan22FunControlToVideo,
        "LoadVideo": video.LoadVideo,
        "GetVideoComponents": video.GetVideoComponents,
        "WanFunInpaintToVideo": wan.WanFunInpaintToVideo,
    }
    base.node_classes = lambda: {**core, **fun_classes}  # run_workflow's classes, the Fun 5B nodes with them
    (vae,) = base.run_node(core["VAELoader"], {"vae_name": FILES["vae22"].split("/")[1]})
    seeded = inputs()
    context, x = seeded["context"], seeded["x"]
    cond = [[context, {}]]
    size = {"vae": vae, "width": WIDTH, "height": HEIGHT, "length": LENGTH, "batch_size": 1}
    cases = {
        "control": (
            wan.Wan22FunControlToVideo,
            {"control_video": seeded["control_video"], "ref_image": seeded["ref_image"]},
        ),
        "inpaint": (wan.WanFunInpaintToVideo, {"start_image": seeded["start_image"], "end_image": seeded["end_image"]}),
    }
    out = {
        "source": "ComfyUI 0.3.64 (Comfy-Org/ComfyUI a125cd84)",
        "recorded_by": "scripts/record_comfyui_wan22_fun5b.py",
        "files": {k: {"path": v, "sha256": base.sha256(f"{MODELS}/{v}")} for k, v in FILES.items()},
    }
    for name, (node, images) in cases.items():
        (patcher,) = base.run_node(
            core["UNETLoader"], {"unet_name": FILES[name].split("/")[1], "weight_dtype": "default"}
        )
        model = patcher.model
        pos, _, latent = base.run_node(node, {"positive": cond, "negative": cond, **size, **images})
        opts = pos[0][1]
        with torch.no_grad():
            concat = model.concat_cond(
                noise=x,
                device=torch.device("cpu"),
                **{k: opts[k] for k in ("concat_latent_image", "concat_mask", "concat_mask_index") if k in opts},
            )
            kwargs = {}
            if "reference_latents" in opts:
                extra = model.extra_conds(
                    noise=x, device=torch.device("cpu"), reference_latents=opts["reference_latents"]
                )
                kwargs["reference_latent"] = extra["reference_latent"].cond
            denoised = model.apply_model(x, torch.tensor([0.6]), c_concat=concat, c_crossattn=context, **kwargs)
        out[name] = {
            "model_config": type(model.model_config).__name__,
            "model": type(model).__name__,
            "in_dim": int(model.diffusion_model.patch_embedding.weight.shape[1]),
            "latent_shape": list(latent["samples"].shape),
            "opts": {k: base.b64(v) for k, v in opts.items() if isinstance(v, torch.Tensor)},
            "mask_index": int(opts.get("concat_mask_index", 0)),
            "reference_latents": [base.b64(r) for r in opts.get("reference_latents", [])],
            "concat": base.b64(concat),
            "reference_latent": base.b64(kwargs["reference_latent"]) if kwargs else None,
            "denoised": base.b64(denoised),
        }
    for key, path in WORKFLOWS.items():
        with open(path) as f:
            prompt = json.load(f)
        run = base.run_workflow(prompt)
        frames = np.frombuffer(base64.b64decode(run["frames"]["u8"]), np.uint8).reshape(run["frames"]["shape"])
        array, meta = thinned(frames, MAX_RECORDED_VALUES)  # a strided grid of the frames keeps the fixture small
        run["frames"] = {**meta, "u8": base64.b64encode(array.tobytes()).decode()}
        out[key] = {"prompt": prompt, **run}
    write_json(OUT, out)


if __name__ == "__main__":
    main()
