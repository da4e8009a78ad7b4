"""Record what upstream ComfyUI 0.10.0 (commit 79cdbc81 of hiddenswitch/ComfyUI; 0.3.64 has no Qwen-Image-Layered)
computes on the tiny Qwen-Image-Layered files, as the fixture tests/models/fixtures/comfyui_qwen_image_layered.json.

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_qwen_image_layered.py <fixture> <workspace> \\
        /work/main/workflows_json/qwen_image_layered.json /work/main/workflows_json/qwen_image_layered_control.json

ComfyUI fixes the released widths (24 heads, 3584-wide text, the text encoder's sizes, the VAE's base width); this
script gives its classes the tiny widths read from the files' shapes and changes nothing else. Recorded: what
ComfyUI's detection makes of the layered file (use_additional_t_cond, its default reference method), the
transformer's raw output on seeded multi-frame latents with and without a reference latent, the RGBA VAE's
encode of 3-channel pixels (alpha padded) and its decode, and both shipped workflows (the web UI's two
Qwen-Image-Layered templates on the tiny files) run node by node with 0.10.0's node classes, SaveImage replaced
by what it would write.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import torch
from comfyui_recording import MAX_RECORDED_VALUES, b64, comfyui_on_cpu, node_classes, run_prompt, sha256

OUT, WORKSPACE, *WORKFLOWS = sys.argv[1:]
comfyui_on_cpu()
import comfy.ldm.wan.vae
import comfy.model_detection
import comfy.sd
import comfy.text_encoders.llama
import comfy.text_encoders.qwen_vl
import comfy.utils
import folder_paths
import utils.install_util  # noqa: F401  ComfyUI's own utils package, imported before server.py as main.py does

COMMIT = "79cdbc81"
TRANSFORMER = "diffusion_models/qwen_image_layered_tiny.safetensors"
TEXT_ENCODER = "text_encoders/qwen_2.5_vl_7b_tiny.safetensors"
VAE = "vae/qwen_image_layered_vae_tiny.safetensors"
HEAD = 128
TINY_VISION = {"hidden_size": 16, "num_heads": 1, "intermediate_size": 16, "num_layers": 1}  # the file has none
# (seed, latent shape [B,16,T,H,W], reference shapes, timestep)
CASES = {
    "three_frames_reference": (1, [1, 16, 3, 8, 8], [[1, 16, 1, 8, 8]], 0.7),
    "odd_size_reference": (2, [1, 16, 2, 5, 7], [[1, 16, 1, 5, 7]], 0.4),
    "batch_two_no_reference": (3, [2, 16, 3, 6, 6], [], 0.9),
}
TOKENS = 7


def tiny_widths() -> None:
    te = comfy.utils.load_torch_file(f"{WORKSPACE}/models/{TEXT_ENCODER}")
    vocab, hidden = te["model.embed_tokens.weight"].shape
    sizes = {
        "vocab_size": vocab,
        "hidden_size": hidden,
        "num_hidden_layers": len({k.split(".")[2] for k in te if k.startswith("model.layers.")}),
        "intermediate_size": te["model.layers.0.mlp.gate_proj.weight"].shape[0],
        "num_attention_heads": te["model.layers.0.self_attn.q_proj.weight"].shape[0] // HEAD,
        "num_key_value_heads": te["model.layers.0.self_attn.k_proj.weight"].shape[0] // HEAD,
    }
    config = comfy.text_encoders.llama.Qwen25_7BVLI_Config
    comfy.text_encoders.llama.Qwen25_7BVLI_Config = lambda **kw: config(**{**sizes, **kw})
    tower = comfy.text_encoders.qwen_vl.Qwen2VLVisionTransformer
    comfy.text_encoders.qwen_vl.Qwen2VLVisionTransformer = lambda **kw: tower(**{**kw, **TINY_VISION})
    detect_te = comfy.sd.detect_te_model

    def detect_te_tiny(sd):
        if sd.get("model.layers.0.post_attention_layernorm.weight", torch.empty(0)).shape[0] == hidden:
            return comfy.sd.TEModel.QWEN25_7B
        return detect_te(sd)

    comfy.sd.detect_te_model = detect_te_tiny
    vae_dim = comfy.utils.load_torch_file(f"{WORKSPACE}/models/{VAE}")["encoder.conv1.weight"].shape[0]
    wan = comfy.ldm.wan.vae.WanVAE
    comfy.ldm.wan.vae.WanVAE = lambda **cfg: wan(**{**cfg, "dim": vae_dim})
    detect = comfy.model_detection.detect_unet_config

    def detect_tiny(state_dict, key_prefix, metadata=None):
        cfg = detect(state_dict, key_prefix, metadata=metadata)
        if cfg is not None and cfg.get("image_model") == "qwen_image":
            cfg["num_attention_heads"] = state_dict[f"{key_prefix}img_in.weight"].shape[0] // HEAD
            cfg["joint_attention_dim"] = state_dict[f"{key_prefix}txt_in.weight"].shape[1]
        return cfg

    comfy.model_detection.detect_unet_config = detect_tiny


def inputs(seed: int, shape: list[int], refs: list[list[int]], width: int):
    """(x, context, references) drawn from one generator in this order (the test draws them alike)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    context = torch.randn(shape[0], TOKENS, width, generator=g)
    return x, context, [torch.randn(r, generator=g) for r in refs]


def vae_record() -> dict:
    """The RGBA VAE on seeded pixels: 3-channel IMAGE encoded (ComfyUI pads alpha 1.0), a latent decoded."""
    vae = comfy.sd.VAE(sd=comfy.utils.load_torch_file(f"{WORKSPACE}/models/{VAE}"))
    g = torch.Generator().manual_seed(5)
    pixels = torch.rand(1, 24, 32, 3, generator=g)
    latent = torch.randn(2, 16, 1, 3, 4, generator=g)
    return {
        "output_channels": vae.output_channels,
        "pixels": b64(pixels),
        "encoded": b64(vae.encode(pixels)),
        "latent": b64(latent),
        "decoded": b64(vae.decode(latent)),
    }


def run_workflow(prompt: dict) -> dict:
    """The workflow node by node in dependency order with 0.10.0's node classes; SaveImage replaced by what it
    would write."""
    import comfy_extras.nodes_post_processing  # noqa: F401  before nodes_latent, which it and that import circularly
    from comfy_extras import (
        nodes_edit_model,
        nodes_images,
        nodes_latent,
        nodes_model_advanced,
        nodes_primitive,
        nodes_qwen,
    )

    classes = node_classes(
        nodes_edit_model, nodes_images, nodes_latent, nodes_model_advanced, nodes_primitive, nodes_qwen
    )

    def no_ui_node(class_type: str, inputs: dict):
        # GetImageSize reads its hidden unique_id (to show the size on the node) and an executor gives it one;
        # run node by node it has none: give it an empty one, its outputs are its own
        if class_type == "GetImageSize":
            cls = classes[class_type]
            cls.hidden = SimpleNamespace(unique_id=None)
            return tuple(cls.execute(**inputs).result)
        return None

    return run_prompt(prompt, classes, no_ui_node, max_values=MAX_RECORDED_VALUES)


def main() -> None:
    torch.set_num_threads(1)
    tiny_widths()
    patcher = comfy.sd.load_diffusion_model(f"{WORKSPACE}/models/{TRANSFORMER}")
    net = patcher.model.diffusion_model
    out = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_qwen_image_layered.py",
        "files": {
            k: {"path": v, "sha256": sha256(f"{WORKSPACE}/models/{v}")}
            for k, v in {"transformer": TRANSFORMER, "text_encoder": TEXT_ENCODER, "vae": VAE}.items()
        },
        "detected": {
            "default_ref_method": net.default_ref_method,
            "use_additional_t_cond": net.time_text_embed.use_additional_t_cond,
            "latent_format": type(patcher.model.latent_format).__name__,
        },
        "cases": {},
    }
    for name, (seed, shape, refs, t) in CASES.items():
        x, context, references = inputs(seed, shape, refs, net.txt_in.weight.shape[1])
        with torch.no_grad():
            result = net(x, torch.tensor([t] * shape[0]), context, ref_latents=references or None)
        out["cases"][name] = {"seed": seed, "shape": shape, "refs": refs, "timestep": t, "out": b64(result)}
    out["vae"] = vae_record()
    for folder in ("diffusion_models", "text_encoders", "vae"):
        folder_paths.add_model_folder_path(folder, f"{WORKSPACE}/models/{folder}", is_default=True)
    folder_paths.set_input_directory(f"{WORKSPACE}/input")
    out["workflows"] = {}
    for path in WORKFLOWS:
        with open(path) as f:
            out["workflows"][path.rsplit("/", 1)[-1].removesuffix(".json")] = run_workflow(json.load(f))
    with open(OUT, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
