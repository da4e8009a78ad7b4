"""Record what upstream ComfyUI 0.10.0 (commit 79cdbc81 of hiddenswitch/ComfyUI) does with a Kandinsky 5 image DiT
(kandinsky5lite_t2i's layout at its 2560 width, one visual block: demo-models' kandinsky5lite_t2i_tiny, written by
nodes/models/kandinsky5_demo.py's write_image_test_file; the test checks it by its sha256), as the fixture
tests/models/test_kandinsky5_image.py compares our loader with (tests/models/fixtures/comfyui_kandinsky5_image.json.xz).

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_kandinsky5_image.py \\
        /work/main/tests/models/fixtures/comfyui_kandinsky5_image.json \\
        <workspace>/models/diffusion_models/kandinsky5lite_t2i_tiny.safetensors \\
        <workspace with demo-models> /work/main/workflows_json/kandinsky5_t2i.json

The prompt is workflows_json/kandinsky5_t2i.json (scripts/kandinsky5_workflow.py's image_workflow_ui converted by our
UI converter; the e2e test compares it with the recorded one); it runs node by node with ComfyUI's classes, the tiny text encoders and flux-tiny's VAE given
their sizes as scripts/record_comfyui_kandinsky5_text.py and scripts/record_comfyui_chroma.py give them.

ComfyUI's model_detection reads the file whole except its text widths (Qwen2.5-VL's 3584 and CLIP-L's 768 fixed by
supported_models.Kandinsky5Image): this script gives them the file's (32 and 32) and changes nothing else. Recorded:
the detected classes, the model sampling's shift, the latent format, apply_model's prediction for seeded 4-D
latents, text states and pooled vectors at two sigmas (the test draws them again), and the image template's picture.
"""

from __future__ import annotations

import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, sha256, write_json

ARGS = sys.argv[1:5]
comfyui_on_cpu()
import comfy.ldm.modules.diffusionmodules.model as ldm_vae  # noqa: E402
import comfy.sd  # noqa: E402
import comfy.supported_models  # noqa: E402
import comfy.utils  # noqa: E402

COMMIT = "79cdbc81"
SIGMAS = (0.7, 0.25)


def inputs(seed: int = 5) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "x": torch.randn(2, 16, 6, 10, generator=g),
        "context": torch.randn(2, 5, 32, generator=g),
        "y": torch.randn(2, 32, generator=g),
    }


def run_image_template(path: str, workspace: str, prompt_path: str) -> dict:
    import json
    import os

    import comfy_extras.nodes_model_advanced
    import folder_paths
    from comfyui_recording import node_classes, run_prompt
    from record_comfyui_kandinsky5_text import CLIP_L, QWEN, tiny_sizes

    models = f"{workspace}/models"
    tiny_sizes(comfy.utils.load_torch_file(f"{models}/{QWEN}"), comfy.utils.load_torch_file(f"{models}/{CLIP_L}"))
    ae = comfy.utils.load_torch_file(f"{models}/vae/flux-tiny-ae.safetensors")
    sizes = {
        "ch": ae["encoder.conv_in.weight"].shape[0],
        "ch_mult": [1] * len({k.split(".")[2] for k in ae if k.startswith("encoder.down.")}),
        "num_res_blocks": len({k.split(".")[4] for k in ae if k.startswith("encoder.down.0.block.")}),
    }
    for name in ("Encoder", "Decoder"):
        cls = getattr(ldm_vae, name)
        setattr(ldm_vae, name, lambda cls=cls, **kw: cls(**{**kw, **sizes}))
    for folder in ("vae", "text_encoders"):
        folder_paths.add_model_folder_path(folder, f"{models}/{folder}", is_default=True)
    folder_paths.add_model_folder_path("diffusion_models", os.path.dirname(path), is_default=True)
    prompt = json.loads(open(prompt_path).read())
    return run_prompt(prompt, node_classes(comfy_extras.nodes_model_advanced))


def main() -> None:
    torch.set_num_threads(1)
    out_path, path, workspace, prompt_path = ARGS
    sd = comfy.utils.load_torch_file(path)
    comfy.supported_models.Kandinsky5Image.unet_extra_config = {
        "in_text_dim": int(sd["text_embeddings.in_layer.weight"].shape[1]),
        "in_text_dim2": int(sd["pooled_text_embeddings.in_layer.weight"].shape[1]),
    }
    model = comfy.sd.load_diffusion_model_state_dict(sd, model_options={"dtype": torch.float32}).model
    data = inputs()
    out = {
        "comfyui_commit": COMMIT,
        "file_sha256": sha256(path),
        "model_class": type(model).__name__,
        "config_class": type(model.model_config).__name__,
        "latent_format": type(model.latent_format).__name__,
        "shift": float(model.model_sampling.shift),
        "multiplier": float(model.model_sampling.multiplier),
        "input_sums": {k: float(v.sum()) for k, v in data.items()},
        "denoised": {},
    }
    with torch.no_grad():
        conds = model.extra_conds(
            noise=data["x"], device=torch.device("cpu"), pooled_output=data["y"], cross_attn=data["context"]
        )
        kwargs = {k: v.process_cond(batch_size=2, area=None, device=torch.device("cpu")).cond for k, v in conds.items()}
        out["cond_keys"] = sorted(kwargs)
        for sigma in SIGMAS:
            denoised = model.apply_model(data["x"], torch.full((2,), sigma), **kwargs)
            out["denoised"][str(sigma)] = b64(denoised)
            print(sigma, tuple(denoised.shape), float(denoised.abs().max()), file=sys.stderr)
    out["image_template"] = run_image_template(path, workspace, prompt_path)
    print(
        out["model_class"], out["config_class"], out["latent_format"], out["shift"], out["cond_keys"], file=sys.stderr
    )
    print("wrote", write_json(out_path, out), file=sys.stderr)


if __name__ == "__main__":
    main()
