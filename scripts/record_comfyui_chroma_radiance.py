"""Record what ComfyUI 0.3.64 (commit a125cd84) computes for Chroma Radiance on the tiny demo files, as the
fixture tests/models/fixtures/comfyui_chroma_radiance.json.

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_chroma_radiance.py <fixture> <workspace> \\
        /work/main/workflows_json/chroma_radiance_text_to_image.json

ComfyUI fixes the released sizes (Chroma1's 3072-wide transformer and 5120-wide approximator, the NeRF head's 64
width, 8 frequencies, ratio 4 and 4 blocks, T5-XXL's config); this script gives its classes the tiny sizes read from
the files' shapes and the tiny T5's own vocabulary (a unigram tokenizer of nodes/models/configs/flux-tiny/t5_vocab.json in place of T5-XXL's) and
changes nothing else (but --fp32-text-enc): model_base.ChromaRadiance, its NeRF head, the pixel_space VAE and the
samplers are ComfyUI's. Recorded: the model's raw output on seeded pixel inputs (a size that is not a multiple of the
16-pixel patches, a batch of two, a guidance value, NeRF tiling on and off); and the shipped workflow (the web UI's
Chroma1 Radiance template on the tiny files) run node by node with 0.3.64's node classes, SaveImage replaced by what
it would write. The text side is Chroma's (scripts/record_comfyui_chroma.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys

import torch
from comfyui_recording import tiny_t5_in_comfyui

OUT, WORKSPACE, WORKFLOW = sys.argv[1:4]
sys.argv[1:] = ["--cpu", "--fp32-text-enc"]
import comfy.cli_args

comfy.cli_args.args.cpu = True
# ComfyUI stores a text encoder's weights in float16 by default (model_management.text_encoder_dtype, CPU or GPU);
# ours compute in the file's dtype, float32 for the tiny T5, so the comparison runs ComfyUI's in float32 too.
comfy.cli_args.args.fp32_text_enc = True
import comfy.model_detection
import comfy.sd
import comfy.sd1_clip
import comfy.text_encoders.pixart_t5
import comfy.utils
import folder_paths
import numpy as np

COMMIT = "a125cd84"
DIT = "diffusion_models/chroma_radiance_tiny.safetensors"
TEXT_ENCODER = "text_encoders/flux-tiny-t5.safetensors"
VOCAB = "/work/main/nodes/models/configs/flux-tiny/t5_vocab.json"
AXES = [4, 4, 8]  # flux-tiny's RoPE axes (its config folder; Chroma1's are 16/56/56)
# (seed, pixel shape, context rows, timestep(s), guidance, NeRF tile size: -1 the model's, 0 untiled)
CASES = {
    "one": (1, [1, 3, 32, 48], 5, [0.7], 0.0, -1),
    "odd_size": (2, [1, 3, 40, 23], 3, [0.3], 0.0, -1),
    "batch_two": (3, [2, 3, 32, 32], 4, [0.9, 0.2], 0.0, -1),
    "guidance_untiled": (4, [1, 3, 48, 32], 6, [0.5], 4.0, 0),
    "tiled_by_two": (5, [1, 3, 48, 48], 4, [0.4], 0.0, 2),
}


def b64(t: torch.Tensor) -> dict:
    t = t.detach().to(torch.float32).contiguous()
    return {"shape": list(t.shape), "f32": base64.b64encode(t.numpy().tobytes()).decode()}


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def tiny_sizes() -> None:
    tiny_t5_in_comfyui(f"{WORKSPACE}/models/{TEXT_ENCODER}", VOCAB, comfy.text_encoders.pixart_t5)

    dit = comfy.utils.load_torch_file(f"{WORKSPACE}/models/{DIT}")
    detect = comfy.model_detection.detect_unet_config

    def detect_tiny(state_dict, key_prefix, metadata=None):
        cfg = detect(state_dict, key_prefix, metadata=metadata)
        if cfg is not None and cfg.get("image_model") == "chroma_radiance":
            hidden = dit["txt_in.weight"].shape[0]
            cfg["hidden_size"] = hidden
            cfg["num_heads"] = hidden // dit["double_blocks.0.img_attn.norm.key_norm.scale"].shape[0]
            cfg["context_in_dim"] = dit["txt_in.weight"].shape[1]
            cfg["axes_dim"] = AXES
            cfg["hidden_dim"] = dit["distilled_guidance_layer.in_proj.weight"].shape[0]
            cfg["out_dim"] = hidden
            cfg["n_layers"] = len({k.split(".")[2] for k in dit if k.startswith("distilled_guidance_layer.layers.")})
            width, embed_in = dit["nerf_image_embedder.embedder.0.weight"].shape
            cfg["nerf_hidden_size"] = width
            cfg["nerf_max_freqs"] = int((embed_in - 3) ** 0.5)
            cfg["nerf_mlp_ratio"] = dit["nerf_blocks.0.param_generator.weight"].shape[0] // (3 * width * width)
            cfg["nerf_depth"] = len({k.split(".")[1] for k in dit if k.startswith("nerf_blocks.")})
        return cfg

    comfy.model_detection.detect_unet_config = detect_tiny


def run_node(cls, inputs: dict) -> tuple:
    if hasattr(cls, "FUNCTION"):
        return getattr(cls(), cls.FUNCTION)(**inputs)
    out = cls.execute(**inputs)  # a v3 node (io.ComfyNode)
    return tuple(out.result) if hasattr(out, "result") else out


def run_workflow(prompt: dict) -> dict:
    """The workflow node by node in dependency order with 0.3.64's node classes; SaveImage replaced by what it
    would write."""
    from comfy_extras import nodes_chroma_radiance, nodes_cond, nodes_custom_sampler, nodes_model_advanced

    import nodes

    classes = dict(nodes.NODE_CLASS_MAPPINGS)
    for module in (nodes_chroma_radiance, nodes_cond, nodes_custom_sampler, nodes_model_advanced):
        classes.update(getattr(module, "NODE_CLASS_MAPPINGS", {}))
        for cls in vars(module).values():
            if isinstance(cls, type) and cls.__module__ == module.__name__ and hasattr(cls, "define_schema"):
                classes[cls.define_schema().node_id] = cls
    results: dict[str, tuple] = {}

    def run(node_id: str) -> tuple:
        if node_id not in results:
            node = prompt[node_id]
            inputs = {k: run(v[0])[v[1]] if isinstance(v, list) else v for k, v in node["inputs"].items()}
            if node["class_type"] == "SaveImage":
                results[node_id] = (inputs["images"],)
            else:
                results[node_id] = run_node(classes[node["class_type"]], inputs)
        return results[node_id]

    (save,) = [k for k, v in prompt.items() if v["class_type"] == "SaveImage"]
    pngs = []
    for im in run(save)[0]:
        png = np.clip(255.0 * im.detach().cpu().numpy(), 0, 255).astype(np.uint8)
        pngs.append({"shape": list(png.shape), "u8": base64.b64encode(png.tobytes()).decode()})
    return {"prompt": prompt, "pngs_rgb": pngs}


def inputs(seed: int, shape: list[int], rows: int, width: int):
    """(x, context) drawn from one generator in this order (the test draws them alike)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g), torch.randn(1, rows, width, generator=g)


def main() -> None:
    torch.set_num_threads(1)
    tiny_sizes()
    out = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_chroma_radiance.py",
        "files": {p: sha256(f"{WORKSPACE}/models/{p}") for p in (DIT, TEXT_ENCODER)},
        "cases": {},
    }
    model = comfy.sd.load_diffusion_model(f"{WORKSPACE}/models/{DIT}").model
    width = model.diffusion_model.txt_in.weight.shape[1]
    for name, (seed, shape, rows, t, guidance, tile) in CASES.items():
        x, context = inputs(seed, shape, rows, width)
        options = {} if tile < 0 else {"chroma_radiance_options": {"nerf_tile_size": tile}}
        with torch.no_grad():
            result = model.diffusion_model(
                x,
                torch.tensor(t),
                context.expand(shape[0], -1, -1),
                torch.tensor([guidance] * shape[0]),
                transformer_options=options,
            )
        out["cases"][name] = {"out": b64(result)}
    for folder in ("diffusion_models", "text_encoders"):
        folder_paths.add_model_folder_path(folder, f"{WORKSPACE}/models/{folder}", is_default=True)
    with open(WORKFLOW) as f:
        out["workflow"] = run_workflow(json.load(f))
    with open(OUT, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
