"""Record what upstream ComfyUI 0.10.0 (commit 79cdbc81 of hiddenswitch/ComfyUI; 0.3.64 has no Qwen-Image-Edit
2511) computes for the `index_timestep_zero` reference method on the tiny files, as the fixture
tests/models/fixtures/comfyui_qwen_image_edit_2511.json.

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_qwen_image_edit_2511.py <fixture> <workspace> \\
        /work/main/workflows_json/qwen_image_edit_2511.json

ComfyUI fixes the released widths (Qwen-Image's 24 heads and 3584-wide text, the text encoder's and its vision
tower's sizes, the VAE's base width); this script gives its classes the tiny widths read from the files' shapes
and changes nothing else. Recorded: the default reference method ComfyUI's detection
gives each file (the 2511 file's `__index_timestep_zero__` marker), and the transformer's raw output on seeded
inputs with reference latents: the 2511 file with its default, with `index` asked for, with two references of
different sizes and with none; the 2509-layout file with `index_timestep_zero` asked for (as
FluxKontextMultiReferenceLatentMethod sets it); that node's conditioning value; and the shipped workflow (the web
UI's Qwen-Image-Edit 2511 template on the tiny files) run node by node with 0.10.0's node classes, SaveImage
replaced by what it would write.
"""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import MAX_RECORDED_VALUES, b64, comfyui_on_cpu, node_classes, run_prompt, sha256

OUT, WORKSPACE, WORKFLOW = sys.argv[1:4]
comfyui_on_cpu()
import comfy.ldm.wan.vae
import comfy.model_detection
import comfy.sd
import comfy.text_encoders.llama
import comfy.text_encoders.qwen_vl
import comfy.utils
import folder_paths

COMMIT = "79cdbc81"
FILES = {
    "2511": "diffusion_models/qwen_image_edit_2511_tiny.safetensors",
    "2509": "diffusion_models/qwen_image_tiny.safetensors",
}
HEAD, VISION_HEAD = 128, 80
TEXT_ENCODER = "text_encoders/qwen_2.5_vl_7b_edit_tiny.safetensors"
VAE = "vae/qwen_image_vae_tiny.safetensors"
# (file, seed, latent shape, reference shapes, timestep, method or None for the file's default)
CASES = {
    "2511_default": ("2511", 1, [1, 16, 1, 8, 8], [[1, 16, 1, 6, 10]], 0.7, None),
    "2511_two_references": ("2511", 2, [1, 16, 1, 6, 8], [[1, 16, 1, 8, 8], [1, 16, 1, 4, 6]], 0.4, None),
    "2511_index": ("2511", 1, [1, 16, 1, 8, 8], [[1, 16, 1, 6, 10]], 0.7, "index"),
    "2511_no_reference": ("2511", 3, [1, 16, 1, 6, 6], [], 0.9, None),
    "2509_timestep_zero": ("2509", 4, [2, 16, 1, 6, 8], [[2, 16, 1, 6, 8]], 0.5, "index_timestep_zero"),
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
    width = te["visual.patch_embed.proj.weight"].shape[0]
    vision = {
        "hidden_size": width,
        "num_heads": width // VISION_HEAD,
        "intermediate_size": te["visual.blocks.0.mlp.gate_proj.weight"].shape[0],
        "num_layers": len({k.split(".")[2] for k in te if k.startswith("visual.blocks.")}),
    }
    tower = comfy.text_encoders.qwen_vl.Qwen2VLVisionTransformer
    comfy.text_encoders.qwen_vl.Qwen2VLVisionTransformer = lambda **kw: tower(**{**kw, **vision})
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


def run_workflow(prompt: dict) -> dict:
    """The workflow node by node in dependency order with 0.10.0's node classes (ComfySwitchNode given both
    inputs: the same choice); SaveImage replaced by what it would write."""
    from comfy_extras import (
        nodes_cfg,
        nodes_flux,
        nodes_logic,
        nodes_model_advanced,
        nodes_primitive,
        nodes_qwen,
    )

    classes = node_classes(nodes_cfg, nodes_flux, nodes_logic, nodes_model_advanced, nodes_primitive, nodes_qwen)
    return run_prompt(prompt, classes, max_values=MAX_RECORDED_VALUES)


def main() -> None:
    torch.set_num_threads(1)
    tiny_widths()
    nets = {k: comfy.sd.load_diffusion_model(f"{WORKSPACE}/models/{v}").model.diffusion_model for k, v in FILES.items()}
    out = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_qwen_image_edit_2511.py",
        "files": {k: {"path": v, "sha256": sha256(f"{WORKSPACE}/models/{v}")} for k, v in FILES.items()},
        "default_ref_method": {k: net.default_ref_method for k, net in nets.items()},
        "cases": {},
    }
    for name, (file, seed, shape, refs, t, method) in CASES.items():
        net = nets[file]
        x, context, references = inputs(seed, shape, refs, net.txt_in.weight.shape[1])
        kwargs = {"ref_latents": references or None}
        if method is not None:
            kwargs["ref_latents_method"] = method
        with torch.no_grad():
            result = net(x, torch.tensor([t] * shape[0]), context, **kwargs)
        out["cases"][name] = {
            "file": file,
            "seed": seed,
            "shape": shape,
            "refs": refs,
            "timestep": t,
            "method": method,
            "out": b64(result),
        }
    from comfy_extras.nodes_flux import FluxKontextMultiReferenceLatentMethod

    cond = FluxKontextMultiReferenceLatentMethod.execute([[torch.zeros(1, 1, 1), {}]], "index_timestep_zero")
    out["method_node"] = cond.result[0][0][1]
    for folder in ("diffusion_models", "text_encoders", "vae", "loras"):
        folder_paths.add_model_folder_path(folder, f"{WORKSPACE}/models/{folder}", is_default=True)
    folder_paths.set_input_directory(f"{WORKSPACE}/input")
    with open(WORKFLOW) as f:
        out["workflow"] = run_workflow(json.load(f))
    with open(OUT, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
