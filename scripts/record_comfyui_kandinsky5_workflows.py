"""Record upstream ComfyUI 0.10.0's (commit 79cdbc81 of hiddenswitch/ComfyUI) frames of the shipped Kandinsky 5
workflows (workflows_json/kandinsky5_t2v.json and kandinsky5_i2v.json: the web UI's templates on the tiny files,
written by scripts/kandinsky5_workflow.py) as the fixture tests/e2e/test_kandinsky5_workflow.py compares our renders
with (tests/models/fixtures/comfyui_kandinsky5_workflows.json.xz).

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_kandinsky5_workflows.py \\
        /work/main/tests/models/fixtures/comfyui_kandinsky5_workflows.json <workspace>

Each workflow runs node by node with ComfyUI's own classes (CreateVideo / SaveVideo left out: VAEDecode's frames are
recorded). The tiny files' sizes are given to ComfyUI as scripts/record_comfyui_kandinsky5.py (the DiT's text widths),
scripts/record_comfyui_kandinsky5_text.py (Qwen2.5-VL and CLIP-L configs) and scripts/record_comfyui_hunyuan_video_vae.py
(the HunyuanVideo VAE's widths and blocks) do;
nothing else of ComfyUI is changed.
"""

from __future__ import annotations

import importlib
import json
import sys

import torch
from comfyui_recording import MAX_RECORDED_VALUES, comfyui_on_cpu, node_classes, png_rgb, run_node, sha256, write_json

OUT, WORKSPACE = sys.argv[1:3]
comfyui_on_cpu()
import comfy.supported_models  # noqa: E402
import comfy.utils  # noqa: E402
import folder_paths  # noqa: E402
from record_comfyui_hunyuan_video_vae import tiny_sizes as tiny_vae_sizes  # noqa: E402
from record_comfyui_kandinsky5_text import CLIP_L, QWEN, tiny_sizes  # noqa: E402

COMMIT = "79cdbc81"
REPO = "/work/main"
WORKFLOWS = ("kandinsky5_t2v", "kandinsky5_i2v")
DIT = "diffusion_models/kandinsky5lite_t2v_tiny.safetensors"
VAE = "vae/hunyuan_video_vae_tiny.safetensors"


def tiny_files() -> None:
    models = f"{WORKSPACE}/models"
    dit = comfy.utils.load_torch_file(f"{models}/{DIT}")
    comfy.supported_models.Kandinsky5.unet_extra_config = {
        "in_text_dim": int(dit["text_embeddings.in_layer.weight"].shape[1]),
        "in_text_dim2": int(dit["pooled_text_embeddings.in_layer.weight"].shape[1]),
    }
    tiny_sizes(comfy.utils.load_torch_file(f"{models}/{QWEN}"), comfy.utils.load_torch_file(f"{models}/{CLIP_L}"))
    tiny_vae_sizes(comfy.utils.load_torch_file(f"{models}/{VAE}"))
    for folder in ("diffusion_models", "vae", "text_encoders"):
        folder_paths.add_model_folder_path(folder, f"{models}/{folder}", is_default=True)
    folder_paths.set_input_directory(f"{WORKSPACE}/input")


def record_workflow(prompt: dict, classes: dict) -> dict:
    results: dict[str, tuple] = {}

    def run(node_id: str) -> tuple:
        if node_id not in results:
            node = prompt[node_id]
            inputs = {k: run(v[0])[v[1]] if isinstance(v, list) else v for k, v in node["inputs"].items()}
            results[node_id] = run_node(classes[node["class_type"]], inputs)
        return results[node_id]

    (decode,) = [k for k, v in prompt.items() if v["class_type"] == "VAEDecode"]
    frames = run(decode)[0]
    return {
        "prompt": prompt,
        "latent_shape": list(run(prompt[decode]["inputs"]["samples"][0])[0]["samples"].shape),
        "frames": png_rgb(frames, MAX_RECORDED_VALUES),
    }


def main() -> None:
    torch.set_num_threads(1)
    tiny_files()
    # nodes_post_processing before nodes_latent: their imports are circular
    names = ("nodes_post_processing", "nodes_latent", "nodes_kandinsky5", "nodes_model_advanced", "nodes_primitive")
    classes = node_classes(*(importlib.import_module(f"comfy_extras.{n}") for n in names))
    files = (DIT, VAE, QWEN, CLIP_L)
    out = {
        "comfyui_commit": COMMIT,
        "files": {rel: sha256(f"{WORKSPACE}/models/{rel}") for rel in files},
        "input_sha256": sha256(f"{WORKSPACE}/input/example.png"),
        "workflows": {},
    }
    for name in WORKFLOWS:
        prompt = json.loads(open(f"{REPO}/workflows_json/{name}.json").read())
        out["workflows"][name] = record_workflow(prompt, classes)
        print(name, out["workflows"][name]["latent_shape"], file=sys.stderr)
    print("wrote", write_json(OUT, out), file=sys.stderr)


if __name__ == "__main__":
    main()
