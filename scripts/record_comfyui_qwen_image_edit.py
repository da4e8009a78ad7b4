"""Record what ComfyUI 0.3.64 computes for Qwen-Image-Edit on the tiny demo files, as the fixture our edit
encoders are tested on (tests/models/fixtures/comfyui_qwen_image_edit.json.xz).

Run inside ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here), after
`comfy-cluster demo-models` wrote the tiny files (qwen-image-tiny and qwen-image-edit-tiny) and the example image:

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=1 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_qwen_image_edit.py /work/main/tests/models/fixtures/comfyui_qwen_image_edit.json.xz \\
        <workspace> /work/main/workflows_json/qwen_image_edit_2509.json

ComfyUI fixes the released widths (Qwen-Image's 24 heads and 3584-wide text, its text encoder's sizes, the
vision tower's 1280 width, 16 heads, 3420-wide MLP and 32 blocks, the VAE's base width 96); so that its own
classes load the tiny files, this script gives them the tiny widths read from the files' shapes and changes
nothing else: tokenizer, templates, vision preprocessing, positions, nodes, samplers are ComfyUI's.

Recorded: the vision tower's tokens and grid for images of several sizes (window permutation, the minimum-pixel
rule); token ids of edit prompts with images (an image's place as -1); the conditioning TextEncodeQwenImageEdit
and TextEncodeQwenImageEditPlus return (the states, the reference latents) for images of different sizes, with
and without a VAE, a missing first image, no image; and the shipped workflow (the web UI's Qwen-Image-Edit 2509
template on the tiny files) run node by node with ComfyUI's classes. Two of its nodes are newer than 0.3.64 and
model-free: ComfySwitchNode (here: its chosen input, read lazily as ComfyUI does) and SaveImageAdvanced (here:
what an 8-bit PNG holds, as for SaveImage).
"""

from __future__ import annotations

import json
import logging
import sys

import torch
from comfyui_recording import MAX_RECORDED_VALUES, b64, comfyui_on_cpu, png_rgb, run_node, sha256, write_json

OUT, WORKSPACE, WORKFLOW = sys.argv[1:4]
comfyui_on_cpu()
import comfy.ldm.wan.vae
import comfy.model_detection
import comfy.sd
import comfy.text_encoders.llama
import comfy.text_encoders.qwen_vl
import comfy.utils
import folder_paths

COMMIT = "a125cd84b054a57729b5eecab930ca9408719832"
MODELS = f"{WORKSPACE}/models"
FILES = {
    "transformer": "diffusion_models/qwen_image_tiny.safetensors",
    "text_encoder": "text_encoders/qwen_2.5_vl_7b_edit_tiny.safetensors",
    "vae": "vae/qwen_image_vae_tiny.safetensors",
    "lora": "loras/qwen_image_edit_tiny_lightning.safetensors",
}
HEAD, VISION_HEAD = 128, 80
PROMPT = "make the disc a red cube"


def tiny_widths() -> None:
    """Give ComfyUI's Qwen-Image classes the tiny files' widths (see the module docstring)."""
    te = comfy.utils.load_torch_file(f"{MODELS}/{FILES['text_encoder']}")
    vocab, hidden = te["model.embed_tokens.weight"].shape
    layers = len({k.split(".")[2] for k in te if k.startswith("model.layers.")})
    sizes = dict(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        intermediate_size=te["model.layers.0.mlp.gate_proj.weight"].shape[0],
        num_attention_heads=te["model.layers.0.self_attn.q_proj.weight"].shape[0] // HEAD,
        num_key_value_heads=te["model.layers.0.self_attn.k_proj.weight"].shape[0] // HEAD,
    )
    config = comfy.text_encoders.llama.Qwen25_7BVLI_Config
    comfy.text_encoders.llama.Qwen25_7BVLI_Config = lambda **kw: config(**{**sizes, **kw})
    width = te["visual.patch_embed.proj.weight"].shape[0]
    vision = dict(
        hidden_size=width,
        num_heads=width // VISION_HEAD,
        intermediate_size=te["visual.blocks.0.mlp.gate_proj.weight"].shape[0],
        num_layers=len({k.split(".")[2] for k in te if k.startswith("visual.blocks.")}),
    )
    tower = comfy.text_encoders.qwen_vl.Qwen2VLVisionTransformer
    comfy.text_encoders.qwen_vl.Qwen2VLVisionTransformer = lambda **kw: tower(**{**kw, **vision})
    detect_te = comfy.sd.detect_te_model  # ComfyUI tells Qwen2.5-VL-7B by its 3584-wide layer norm

    def detect_te_tiny(sd):
        if sd.get("model.layers.0.post_attention_layernorm.weight", torch.empty(0)).shape[0] == hidden:
            return comfy.sd.TEModel.QWEN25_7B
        return detect_te(sd)

    comfy.sd.detect_te_model = detect_te_tiny

    detect = comfy.model_detection.detect_unet_config

    def detect_tiny(state_dict, key_prefix, metadata=None):
        cfg = detect(state_dict, key_prefix, metadata=metadata)
        if cfg is not None and cfg.get("image_model") == "qwen_image":
            cfg["num_attention_heads"] = state_dict[f"{key_prefix}img_in.weight"].shape[0] // HEAD
            cfg["joint_attention_dim"] = state_dict[f"{key_prefix}txt_in.weight"].shape[1]
        return cfg

    comfy.model_detection.detect_unet_config = detect_tiny

    vae_dim = comfy.utils.load_torch_file(f"{MODELS}/{FILES['vae']}")["encoder.conv1.weight"].shape[0]
    wan = comfy.ldm.wan.vae.WanVAE
    comfy.ldm.wan.vae.WanVAE = lambda **cfg: wan(**{**cfg, "dim": vae_dim})


def image(seed: int, height: int, width: int, batch: int = 1) -> torch.Tensor:
    """A seeded IMAGE (the test draws it alike)."""
    return torch.rand(batch, height, width, 3, generator=torch.Generator().manual_seed(seed))


# (seed, height, width): several 2x2 windows; below the minimum pixels; a batch of two (the first is read).
VISION_IMAGES = {"windows": (1, 150, 200, 1), "small": (2, 30, 20, 1), "batch2": (3, 84, 56, 2)}


def record_vision(clip) -> dict:
    model = clip.cond_stage_model.qwen25_7b.transformer
    out = {}
    for name, (seed, h, w, batch) in VISION_IMAGES.items():
        with torch.no_grad():
            embeds, grid = model.preprocess_embed({"type": "image", "data": image(seed, h, w, batch)}, "cpu")
        out[name] = {"seed": seed, "size": [batch, h, w], "embeds": b64(embeds), "grid": grid.tolist()}
    return out


def record_tokens(clip) -> dict:
    plus = "<|im_start|>system\nDescribe the key features of the input image (color, shape, size, texture, objects, background), then explain how the user's text instruction should alter or modify the image. Generate a new image that meets the user's requirements while maintaining consistency with the original input where appropriate.<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
    cases = {
        "edit_one_image": (PROMPT, 1, None),
        "edit_no_image": (PROMPT, 0, None),
        "plus_two_slots": (
            "Picture 1: <|vision_start|><|image_pad|><|vision_end|>Picture 3: "
            "<|vision_start|><|image_pad|><|vision_end|>" + PROMPT,
            2,
            plus,
        ),
        "plus_pad_without_image": ("Picture 1: <|vision_start|><|image_pad|><|vision_end|>x", 0, plus),
        "raw_chat_with_image": ("<|im_start|>user\n<|image_pad|>hi<|im_end|>", 1, None),
    }
    out = {}
    for name, (text, n, template) in cases.items():
        tokens = clip.tokenize(text, images=[image(9, 28, 28)] * n, llama_template=template)["qwen25_7b"][0]
        out[name] = {
            "text": text,
            "images": n,
            "template": template,
            "ids": [t if isinstance(t, int) else -1 for t, *_ in tokens],
        }
    return out


# Node cases: (node, inputs); images by (seed, height, width).
NODE_CASES = {
    "edit_image_vae": ("TextEncodeQwenImageEdit", {"image": (4, 48, 64)}, True),
    "edit_image_no_vae": ("TextEncodeQwenImageEdit", {"image": (5, 40, 40)}, False),
    "edit_no_image": ("TextEncodeQwenImageEdit", {}, True),
    "plus_two_images_vae": ("TextEncodeQwenImageEditPlus", {"image1": (4, 48, 64), "image2": (6, 64, 40)}, True),
    "plus_image2_only_vae": ("TextEncodeQwenImageEditPlus", {"image2": (6, 64, 40)}, True),
    "plus_three_images_no_vae": (
        "TextEncodeQwenImageEditPlus",
        {"image1": (7, 36, 36), "image2": (8, 20, 60), "image3": (4, 48, 64)},
        False,
    ),
    "plus_no_image": ("TextEncodeQwenImageEditPlus", {}, True),
}


def record_nodes(classes: dict, clip, vae) -> dict:
    out = {}
    for name, (node, images, with_vae) in NODE_CASES.items():
        inputs = {"clip": clip, "prompt": PROMPT, **{k: image(*v) for k, v in images.items()}}
        if with_vae:
            inputs["vae"] = vae
        (cond,) = run_node(classes[node], inputs)
        [(tensor, opts)] = cond
        out[name] = {
            "node": node,
            "images": {k: list(v) for k, v in images.items()},
            "vae": with_vae,
            "cond": b64(tensor, MAX_RECORDED_VALUES),
            "keys": sorted(opts),
            "reference_latents": [b64(r, MAX_RECORDED_VALUES) for r in opts.get("reference_latents", [])],
        }
    return out


def node_classes() -> dict:
    from comfy_extras.nodes_cfg import CFGNorm
    from comfy_extras.nodes_flux import FluxKontextImageScale
    from comfy_extras.nodes_model_advanced import ModelSamplingAuraFlow
    from comfy_extras.nodes_primitive import Boolean, Float, Int
    from comfy_extras.nodes_qwen import (
        TextEncodeQwenImageEdit,
        TextEncodeQwenImageEditPlus,
    )

    import nodes

    core = {
        n: getattr(nodes, n)
        for n in (
            "UNETLoader",
            "CLIPLoader",
            "VAELoader",
            "KSampler",
            "VAEDecode",
            "VAEEncode",
            "LoadImage",
            "LoraLoaderModelOnly",
        )
    }
    return {
        **core,
        "CFGNorm": CFGNorm,
        "FluxKontextImageScale": FluxKontextImageScale,
        "ModelSamplingAuraFlow": ModelSamplingAuraFlow,
        "PrimitiveBoolean": Boolean,
        "PrimitiveFloat": Float,
        "PrimitiveInt": Int,
        "TextEncodeQwenImageEdit": TextEncodeQwenImageEdit,
        "TextEncodeQwenImageEditPlus": TextEncodeQwenImageEditPlus,
    }


def run_workflow(prompt: dict) -> dict:
    """The workflow node by node in dependency order with ComfyUI's node classes (see the module docstring for
    the two newer model-free nodes)."""
    classes = node_classes()
    results: dict[str, tuple] = {}

    def value(v):
        return run(v[0])[v[1]] if isinstance(v, list) else v

    def run(node_id: str) -> tuple:
        if node_id not in results:
            node = prompt[node_id]
            if node["class_type"] == "ComfySwitchNode":  # lazy: only the chosen input is computed
                chosen = "on_true" if value(node["inputs"]["switch"]) else "on_false"
                results[node_id] = (value(node["inputs"][chosen]),)
            else:
                inputs = {k: value(v) for k, v in node["inputs"].items()}
                if node["class_type"] == "SaveImageAdvanced":
                    results[node_id] = (inputs["images"],)
                else:
                    results[node_id] = run_node(classes[node["class_type"]], inputs)
        return results[node_id]

    (save,) = [k for k, v in prompt.items() if v["class_type"] == "SaveImageAdvanced"]
    images = run(save)[0]
    return {"prompt": prompt, "pngs_rgb": [png_rgb(im, MAX_RECORDED_VALUES) for im in images]}


def main() -> None:
    logging.getLogger().setLevel(logging.ERROR)
    torch.set_num_threads(1)
    tiny_widths()
    for folder in ("diffusion_models", "text_encoders", "vae", "loras"):
        folder_paths.add_model_folder_path(folder, f"{MODELS}/{folder}", is_default=True)
    folder_paths.set_input_directory(f"{WORKSPACE}/input")
    classes = node_classes()
    (clip,) = run_node(classes["CLIPLoader"], {"clip_name": FILES["text_encoder"].split("/")[1], "type": "qwen_image"})
    (vae,) = run_node(classes["VAELoader"], {"vae_name": FILES["vae"].split("/")[1]})
    fixture = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_qwen_image_edit.py",
        "files": {k: {"path": v, "sha256": sha256(f"{MODELS}/{v}")} for k, v in FILES.items()},
        "vision": record_vision(clip),
        "tokens": record_tokens(clip),
        "nodes": record_nodes(classes, clip, vae),
        "workflow": run_workflow(json.loads(open(WORKFLOW).read())),
    }
    write_json(OUT, fixture)


if __name__ == "__main__":
    main()
