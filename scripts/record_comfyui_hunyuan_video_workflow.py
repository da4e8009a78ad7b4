"""Record ComfyUI's frames of the shipped HunyuanVideo 1.0 workflow (workflows_json/hunyuan_video_t2v.json: the web
UI's hunyuan_video_text_to_video template on the tiny files, written by scripts/hunyuan_video_workflow.py) as the
fixture tests/e2e/test_hunyuan_video_workflow.py compares our renders with
(tests/models/fixtures/comfyui_hunyuan_video_workflow.json.xz).

Run inside ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`:

    cd <ComfyUI source> && PYTHONPATH=<torchvision shim>:<quicktok>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_hunyuan_video_workflow.py \\
        /work/main/tests/models/fixtures/comfyui_hunyuan_video_workflow.json <workspace>

With a third argument (that script's fixture written by another ComfyUI, e.g. 0.3.64's), that record's prompts and
sampled latents are kept beside under "earlier". The workflow runs node by node with ComfyUI's own classes (CreateVideo / SaveVideo left out: VAEDecodeTiled's frames
are recorded). The tiny files' sizes, --fp32-text-enc and the Llama 3 tokenizer are given to ComfyUI as
scripts/record_comfyui_hunyuan_video.py does; nothing else of ComfyUI is changed.
"""

from __future__ import annotations

import importlib
import json
import sys

import torch

OUT, WORKSPACE = sys.argv[1:3]
EARLIER = sys.argv[3] if len(sys.argv) > 3 else None  # another ComfyUI's record of the same workflow, kept beside
# first: it sets ComfyUI's command line before any ComfyUI module is imported
from record_comfyui_hunyuan_video import (  # noqa: E402
    CLIP_L,
    I2V,
    LLAMA,
    T2V,
    VAE,
    VISION,
    tiny_llava_vision,
    tiny_sizes,
    tiny_vae_sizes,
)

# isort: split

import comfy.utils  # noqa: E402
import folder_paths  # noqa: E402
from comfyui_recording import (  # noqa: E402
    MAX_RECORDED_VALUES,
    b64,
    load_json,
    node_classes,
    png_rgb,
    run_node,
    sha256,
    write_json,
)

REPO = "/work/main"
WORKFLOWS = ("hunyuan_video_t2v",)
# the image-to-video prompts tests/e2e/test_hunyuan_video_workflow.py renders (scripts/hunyuan_video_workflow.py)
IMAGE_TO_VIDEO = {"hunyuan_video_i2v_v1": "v1 (concat)", "hunyuan_video_i2v_v2": "v2 (replace)"}


def record_workflow(prompt: dict, classes: dict) -> dict:
    results: dict[str, tuple] = {}

    def run(node_id: str) -> tuple:
        if node_id not in results:
            node = prompt[node_id]
            inputs = {k: run(v[0])[v[1]] if isinstance(v, list) else v for k, v in node["inputs"].items()}
            results[node_id] = run_node(classes[node["class_type"]], inputs)
        return results[node_id]

    (decode,) = [k for k, v in prompt.items() if v["class_type"] == "VAEDecodeTiled"]
    frames = run(decode)[0]
    latent = run(prompt[decode]["inputs"]["samples"][0])[0]["samples"]
    return {
        "prompt": prompt,
        "latent_shape": list(latent.shape),
        "latent": b64(latent, 2048),
        "frames": png_rgb(frames, MAX_RECORDED_VALUES),
    }


def main() -> None:
    import comfyui_version

    torch.set_num_threads(1)
    models = f"{WORKSPACE}/models"
    load = comfy.utils.load_torch_file
    tiny_sizes(load(f"{models}/{LLAMA}"), load(f"{models}/{CLIP_L}"), load(f"{models}/{T2V}"))
    tiny_vae_sizes(load(f"{models}/{VAE}"))
    tiny_llava_vision(load(f"{models}/{VISION}"))
    for folder in ("diffusion_models", "vae", "text_encoders", "clip_vision"):
        folder_paths.add_model_folder_path(folder, f"{models}/{folder}", is_default=True)
    names = ("nodes_custom_sampler", "nodes_model_advanced", "nodes_flux", "nodes_hunyuan")
    classes = node_classes(*(importlib.import_module(f"comfy_extras.{n}") for n in names))
    out = {
        "comfyui_version": comfyui_version.__version__,
        "files": {rel: sha256(f"{models}/{rel}") for rel in (T2V, VAE, LLAMA, CLIP_L)},
        "workflows": {},
    }
    sys.path.insert(0, REPO)
    from scripts.hunyuan_video_workflow import image_to_video_prompt

    folder_paths.set_input_directory(f"{WORKSPACE}/input")
    out["input_sha256"] = sha256(f"{WORKSPACE}/input/example.png")
    out["files"][I2V] = sha256(f"{models}/{I2V}")
    out["files"][VISION] = sha256(f"{models}/{VISION}")
    prompts = {name: json.loads(open(f"{REPO}/workflows_json/{name}.json").read()) for name in WORKFLOWS}
    for name, kind in IMAGE_TO_VIDEO.items():
        prompts[name] = image_to_video_prompt(prompts[WORKFLOWS[0]], kind)
    for name, prompt in prompts.items():
        out["workflows"][name] = record_workflow(prompt, classes)
        print(name, out["workflows"][name]["latent_shape"], file=sys.stderr)
    if EARLIER is not None:
        earlier = load_json(EARLIER)
        kept = ("prompt", "latent_shape", "latent")  # its sampled latents (its frames are not compared)
        workflows = {n: {k: w[k] for k in kept} for n, w in earlier["workflows"].items()}
        out["earlier"] = {"comfyui_version": earlier["comfyui_version"], "workflows": workflows}
    print("wrote", write_json(OUT, out), file=sys.stderr)


if __name__ == "__main__":
    main()
