"""Record what upstream ComfyUI 0.10.0 computes with wan-tiny's VACE model (nodes/models/wan_demo.py's
_vace_model), as tests/models/test_wan_vace.py and tests/e2e/test_wan_vace_workflow.py check it
(tests/models/fixtures/comfyui_wan_vace.json.xz).

Run like scripts/record_comfyui_wan.py (inside ComfyUI's environment, after the tiny files and the workspace's
example.png and example.mp4 were written), whose loaders and tiny-size wrappers it reuses:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_wan_vace.py /work/main/tests/models/fixtures/comfyui_wan_vace.json.xz \\
        <models dir> <input dir> /work/main/workflows_json/wan21_vace_v2v.json

Recorded: WanVaceToVideo's outputs with every optional input (seeded control video, control masks and
reference image; sizes that need resizing and padding) and with none; for each, one denoising evaluation of the
VACE model through ComfyUI's BaseModel (WAN21_Vace.extra_conds' vace_context, apply_model) on seeded inputs,
one of two chained WanVaceToVideo nodes (two contexts, their hints summed) and one of a conditioning without
WanVaceToVideo (the model's default context); the Wan VACE video-to-video
template's workflow (workflows_json/wan21_vace_v2v.json) run node by node with ComfyUI's classes as
record_comfyui_wan.run_workflow runs the others: VAEDecode's frames.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

OUT, MODELS, INPUT, WORKFLOW = sys.argv[1:5]
sys.argv[1:] = [OUT, MODELS, INPUT, WORKFLOW, "/nonexistent"]  # record_comfyui_wan's arguments
sys.path.insert(0, str(Path(__file__).resolve().parent))
import record_comfyui_wan as base  # it imports ComfyUI with --cpu: before any other ComfyUI module
import torch
from comfyui_recording import write_json

VACE_FILES = {
    "vace": "diffusion_models/wan2.1_vace_1.3B_tiny.safetensors",
    "vace_lora": "loras/wan2.1_causvid_t2v_lora_rank32_tiny.safetensors",
}


def vace_classes() -> dict:
    import nodes

    wan = importlib.import_module("comfy_extras.nodes_wan")
    video = importlib.import_module("comfy_extras.nodes_video")
    return {
        "WanVaceToVideo": wan.WanVaceToVideo,
        "TrimVideoLatent": wan.TrimVideoLatent,
        "LoadVideo": video.LoadVideo,
        "GetVideoComponents": video.GetVideoComponents,
        "LoraLoader": nodes.LoraLoader,
    }


def step(patcher, opts: dict, context: torch.Tensor, shape: list[int], seed: int) -> dict:
    """One evaluation to the denoised prediction, the conditioning through the model's extra_conds."""
    x = base.seeded(seed, *shape)
    conds = patcher.model.extra_conds(
        noise=x,
        device=torch.device("cpu"),
        **{k: opts[k] for k in ("vace_frames", "vace_mask", "vace_strength") if k in opts},
    )
    vace_context = conds["vace_context"].cond
    strength = conds["vace_strength"].cond
    denoised = patcher.model.apply_model(
        x, torch.tensor([0.6]), c_crossattn=context, vace_context=vace_context, vace_strength=strength
    )
    return {
        "x": base.b64(x),
        "sigma": 0.6,
        "vace_context": base.b64(vace_context),
        "vace_strength": list(strength),
        "denoised": base.b64(denoised),
    }


def main() -> None:
    import folder_paths

    torch.set_num_threads(1)
    base.tiny_widths()
    for folder in ("diffusion_models", "text_encoders", "vae", "loras"):
        folder_paths.add_model_folder_path(folder, f"{MODELS}/{folder}", is_default=True)
    folder_paths.set_input_directory(INPUT)
    core, vace = base.node_classes(), vace_classes()
    base.node_classes = lambda: {**core, **vace}  # run_workflow's classes, the VACE nodes with them
    (patcher,) = base.run_node(
        core["UNETLoader"], {"unet_name": VACE_FILES["vace"].split("/")[1], "weight_dtype": "default"}
    )
    (vae,) = base.run_node(core["VAELoader"], {"vae_name": base.FILES["vae"].split("/")[1]})
    context = base.seeded(20, 1, 512, 32)
    cond = [[context, {}]]
    inputs = {
        "control_video": torch.rand(7, 40, 40, 3, generator=torch.Generator().manual_seed(23)),
        "control_masks": torch.rand(6, 30, 50, generator=torch.Generator().manual_seed(24)),
        "reference_image": torch.rand(2, 50, 70, 3, generator=torch.Generator().manual_seed(21)),
    }
    out = {
        "source": base.SOURCE,
        "recorded_by": "scripts/record_comfyui_wan_vace.py",
        "files": {
            k: {"path": v, "sha256": base.sha256(f"{MODELS}/{v}")}
            for k, v in {**VACE_FILES, "vae": base.FILES["vae"]}.items()
        },
        "context": base.b64(context),
        "inputs": {k: base.b64(v) for k, v in inputs.items()},
    }
    cases = {"all_inputs": (inputs, 0.7), "no_inputs": ({}, 1.0)}
    for seed, (name, (given, strength)) in enumerate(cases.items()):
        pos, neg, latent, trim = base.run_node(
            vace["WanVaceToVideo"],
            {
                "positive": cond,
                "negative": cond,
                "vae": vae,
                "width": 48,
                "height": 32,
                "length": 9,
                "batch_size": 1,
                "strength": strength,
                **given,
            },
        )
        opts = pos[0][1]
        out[name] = {
            "inputs": sorted(given),
            "strength": strength,
            "latent_shape": list(latent["samples"].shape),
            "trim_latent": trim,
            "vace_frames": [base.b64(t) for t in opts["vace_frames"]],
            "vace_mask": [base.b64(t) for t in opts["vace_mask"]],
            "vace_strength": list(opts["vace_strength"]),
            "neg_equal": all(
                torch.equal(a, b)
                for k in ("vace_frames", "vace_mask")
                for a, b in zip(opts[k], neg[0][1][k], strict=True)
            ),
            "step": step(patcher, opts, context, list(latent["samples"].shape), 30 + seed),
        }
    # a second WanVaceToVideo on the first one's conditioning: two contexts, summed after each VACE layer
    first = base.run_node(
        vace["WanVaceToVideo"],
        {
            "positive": cond,
            "negative": cond,
            "vae": vae,
            "width": 48,
            "height": 32,
            "length": 9,
            "batch_size": 1,
            "strength": 0.7,
            **inputs,
        },
    )[0]
    pos, _, latent, _ = base.run_node(
        vace["WanVaceToVideo"],
        {
            "positive": first,
            "negative": first,
            "vae": vae,
            "width": 48,
            "height": 32,
            "length": 9,
            "batch_size": 1,
            "strength": 1.3,
            "reference_image": inputs["reference_image"].flip(0),
        },
    )
    out["chained"] = {
        "strengths": [0.7, 1.3],
        "vace_strength": list(pos[0][1]["vace_strength"]),
        "step": step(patcher, pos[0][1], context, list(latent["samples"].shape), 50),
    }
    out["default_step"] = step(patcher, {}, context, [1, 16, 3, 4, 6], 40)
    with open(WORKFLOW) as f:
        prompt = json.load(f)
    out["workflow"] = {"prompt": prompt, **base.run_workflow(prompt)}
    write_json(OUT, out)


if __name__ == "__main__":
    main()
