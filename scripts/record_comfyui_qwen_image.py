"""Record what ComfyUI 0.3.64 computes with qwen-image-tiny, as the fixture our Qwen-Image support is tested on
(tests/models/fixtures/comfyui_qwen_image.json.xz).

Run inside ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here), after
`comfy-cluster demo-models` (or nodes.models.qwen_image_demo.build_demo_qwen_image) wrote the tiny files:

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_qwen_image.py /work/main/tests/models/fixtures/comfyui_qwen_image.json.xz \\
        <models dir> /work/main/workflows_json/qwen_image.json

ComfyUI 0.3.64 fixes Qwen-Image's widths to the released model's (24 heads of 128, 3584-wide text states, its
text encoder's sizes, the VAE's base width 96); only its model detection reads in_channels and the depth from
the file. So that its own classes load the tiny files, this script gives them the tiny widths read from the
files' shapes (wrappers below: the transformer's heads and text width, the text encoder's sizes and its
detection, the VAE's base width) and changes nothing else: tokenizer, template, token dropping, model detection, model
sampling, latent format, samplers and nodes are ComfyUI's.

Recorded: the token ids of prompts (template, escapes, embedding words, raw chat text, the pad token); the text
encoder's conditioning (and with CLIPSetLastLayer -2); the transformer's raw output on seeded inputs (even and
odd latent sizes, a batch of two timesteps); the whole model's denoised prediction and latent format; the
model sampling; the VAE's decode and encode; the same on fp8 variants of the files in the layouts of ComfyUI's
fp8 downloads (conditioning and a transformer output); a transformer output with a tiny LoRA in ComfyUI's
accepted Qwen-Image names (LoraLoaderModelOnly); and the shipped demo workflow (workflows_json/qwen_image.json),
with four variants of it (VARIANTS), run node by node with ComfyUI's node classes: the latent's shape and the
images (as SaveImage would write them).
Tensors are float32 base64; the files' sha256 are stored so the test knows it has the same files.
"""

from __future__ import annotations

import json
import logging
import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, png_rgb, run_node, sha256, write_json

OUT, MODELS, WORKFLOW = sys.argv[1:4]
comfyui_on_cpu()
import comfy.ldm.wan.vae  # noqa: E402
import comfy.model_detection  # noqa: E402
import comfy.sd  # noqa: E402
import comfy.text_encoders.llama  # noqa: E402
import comfy.utils  # noqa: E402
import folder_paths  # noqa: E402

COMMIT = "a125cd84b054a57729b5eecab930ca9408719832"
FILES = {
    "transformer": "diffusion_models/qwen_image_tiny.safetensors",
    "text_encoder": "text_encoders/qwen_2.5_vl_7b_tiny.safetensors",
    "vae": "vae/qwen_image_vae_tiny.safetensors",
}
HEAD = 128  # ComfyUI's head width for both networks
PROMPTS = {
    "plain": "a red cube on a wooden table",
    "weights_syntax": "a (red:1.3) cube, \\(escaped\\) [brackets]",
    "embedding_word": "a photo embedding:foo of a cat\nembedding:bar, sunset",
    "raw_chat": "<|im_start|>user\nno template here<|im_end|>\n",
    "pad_token": "left<|endoftext|>right",
    "empty": "",
    "unicode": "café — 東京の夜景 🌃",
}


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


def record_tokens(clip) -> dict:
    return {
        name: {"prompt": text, "ids": [t for t, *_ in clip.tokenize(text)["qwen25_7b"][0]]}
        for name, text in PROMPTS.items()
    }


def record_text(clip) -> dict:
    out = {}
    for name, text in PROMPTS.items():
        for layer in (None, -2):
            if layer is not None and name != "plain":
                continue
            c = clip.clone()
            if layer is not None:
                c.clip_layer(layer)
            tokens = c.tokenize(text)
            result = c.encode_from_tokens(tokens, return_pooled=True, return_dict=True)
            key = name if layer is None else f"{name}_layer_{layer}"
            out[key] = {
                "prompt": text,
                "layer": layer,
                "cond": b64(result["cond"]),
                "pooled_is_none": result["pooled_output"] is None,
                "attention_mask": result["attention_mask"].tolist() if "attention_mask" in result else None,
            }
    return out


def transformer_inputs(seed: int, shape: list[int], tokens: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(x [B,16,1,H,W], context [B,T,width]) as the test makes them: one generator, drawn in this order."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g), torch.randn(shape[0], tokens, width, generator=g)


def record_transformer(patcher) -> list[dict]:
    net = patcher.model.diffusion_model
    width = net.txt_in.weight.shape[1]
    cases = []
    for seed, shape, tokens, t in (
        (1, [1, 16, 1, 8, 8], 7, [0.7]),
        (2, [2, 16, 1, 7, 9], 12, [0.3, 0.9]),
        (3, [1, 16, 1, 6, 10], 5, [1.0]),
    ):
        x, context = transformer_inputs(seed, shape, tokens, width)
        with torch.no_grad():
            out = net(x, torch.tensor(t), context)
        cases.append({"seed": seed, "shape": shape, "tokens": tokens, "timesteps": t, "out": b64(out)})
    return cases


def record_denoised(patcher) -> dict:
    model = patcher.model
    width = model.diffusion_model.txt_in.weight.shape[1]
    x, context = transformer_inputs(4, [1, 16, 1, 6, 8], 9, width)
    sigma = torch.tensor([0.6])
    with torch.no_grad():
        denoised = model.apply_model(x, sigma, c_crossattn=context)
    ms = patcher.get_model_object("model_sampling")
    sigmas = torch.tensor([1.0, 0.75, 0.5, 0.1, 0.01])
    return {
        "seed": 4,
        "shape": [1, 16, 1, 6, 8],
        "tokens": 9,
        "sigma": 0.6,
        "denoised": b64(denoised),
        "process_in": b64(model.process_latent_in(x)),
        "process_out": b64(model.process_latent_out(x)),
        "sampling": {
            "class": type(ms).__name__,
            "sigma_max": float(ms.sigma_max),
            "sigma_min": float(ms.sigma_min),
            "sigmas": sigmas.tolist(),
            "timesteps": ms.timestep(sigmas).tolist(),
        },
    }


def record_vae(vae) -> dict:
    g = torch.Generator().manual_seed(5)
    latent = torch.randn([1, 16, 1, 6, 8], generator=g)
    pixels = torch.rand([1, 52, 68, 3], generator=g)  # not multiples of 8: ComfyUI centre-crops
    return {
        "seed": 5,
        "latent_shape": [1, 16, 1, 6, 8],
        "pixels_shape": [1, 52, 68, 3],
        "decoded": b64(vae.decode(latent)),
        "encoded": b64(vae.encode(pixels)),
    }


FP8_FILES = {
    "transformer": "diffusion_models/qwen_image_tiny_fp8_e4m3fn.safetensors",
    "text_encoder": "text_encoders/qwen_2.5_vl_7b_tiny_fp8_scaled.safetensors",
}


def fp8_variant(sd: dict, part: str) -> dict:
    """The layouts of ComfyUI's fp8 downloads, made from a tiny file (tests/models/test_qwen_image.py makes
    them alike): the transformer's linear weights cast to float8_e4m3fn; the text encoder's layer weights as
    float8 with a float32 per-tensor scale (max |w| / 448) and a `scaled_fp8` marker."""
    out = {}
    for k, v in sd.items():
        if part == "transformer" and v.dim() == 2:
            out[k] = v.to(torch.float8_e4m3fn)
        elif part == "text_encoder" and v.dim() == 2 and k.startswith("model.layers."):
            scale = v.float().abs().max() / 448.0
            out[k] = (v.float() / scale).to(torch.float8_e4m3fn)
            out[k[: -len("weight")] + "scale_weight"] = scale.reshape(())
        else:
            out[k] = v
    if part == "text_encoder":
        out["scaled_fp8"] = torch.empty(0, dtype=torch.float8_e4m3fn)
    return out


def record_fp8(classes: dict) -> dict:
    """ComfyUI's loaders on the fp8 variants: the plain prompt's conditioning, the first transformer case."""
    from safetensors.torch import save_file

    for part, rel in FP8_FILES.items():
        save_file(fp8_variant(comfy.utils.load_torch_file(f"{MODELS}/{FILES[part]}"), part), f"{MODELS}/{rel}")
    (patcher,) = run_node(
        classes["UNETLoader"], {"unet_name": FP8_FILES["transformer"].split("/")[1], "weight_dtype": "default"}
    )
    (clip,) = run_node(
        classes["CLIPLoader"], {"clip_name": FP8_FILES["text_encoder"].split("/")[1], "type": "qwen_image"}
    )
    cond = clip.encode_from_tokens(clip.tokenize(PROMPTS["plain"]))
    return {
        "files": FP8_FILES,
        "text": {"prompt": PROMPTS["plain"], "cond": b64(cond)},
        "transformer": record_transformer(patcher)[0],
    }


LORA_FILE = "loras/qwen_image_tiny_lora.safetensors"
# (the LoRA's name for a layer, its format): the names ComfyUI accepts for Qwen-Image, peft and kohya formats.
LORA_LAYERS = (
    ("transformer.transformer_blocks.0.attn.to_q", "peft"),
    ("lora_unet_transformer_blocks_1_img_mlp_net_0_proj", "kohya"),
    ("transformer_blocks.1.attn.add_k_proj", "kohya"),
    ("diffusion_model.img_in", "peft"),
    ("lycoris_transformer_blocks_0_txt_mod_1", "kohya"),
)


def tiny_lora(shapes: dict) -> dict:
    """A rank-4 LoRA on five layers, drawn from one generator (tests/models/test_qwen_image.py draws it alike);
    `shapes` gives each layer's weight shape by its diffusers name."""
    g = torch.Generator().manual_seed(11)
    out = {}
    for name, kind in LORA_LAYERS:
        layer = name
        for prefix in ("transformer.", "diffusion_model.", "lora_unet_", "lycoris_"):
            layer = layer[len(prefix) :] if layer.startswith(prefix) else layer
        rows, cols = shapes[next(k for k in shapes if k.replace(".", "_") == layer.replace(".", "_") + "_weight")]
        down, up = torch.randn(4, cols, generator=g) * 0.1, torch.randn(rows, 4, generator=g) * 0.1
        if kind == "peft":
            out.update({f"{name}.lora_A.weight": down, f"{name}.lora_B.weight": up})
        else:
            out.update(
                {f"{name}.lora_down.weight": down, f"{name}.lora_up.weight": up, f"{name}.alpha": torch.tensor(2.0)}
            )
    return out


def record_lora(classes: dict) -> dict:
    """LoraLoaderModelOnly (strength 0.8) on the tiny transformer with the tiny LoRA: the first transformer case."""
    from safetensors.torch import save_file

    shapes = {k: tuple(v.shape) for k, v in comfy.utils.load_torch_file(f"{MODELS}/{FILES['transformer']}").items()}
    import os

    os.makedirs(f"{MODELS}/loras", exist_ok=True)
    save_file(tiny_lora(shapes), f"{MODELS}/{LORA_FILE}")
    (patcher,) = run_node(
        classes["UNETLoader"], {"unet_name": FILES["transformer"].split("/")[1], "weight_dtype": "default"}
    )
    (patched,) = run_node(
        classes["LoraLoaderModelOnly"], {"model": patcher, "lora_name": LORA_FILE.split("/")[1], "strength_model": 0.8}
    )
    patched.patch_model()
    try:
        case = record_transformer(patched)[0]
    finally:
        patched.unpatch_model()
    return {"file": LORA_FILE, "strength": 0.8, "transformer": case}


def node_classes() -> dict:
    from comfy_extras.nodes_edit_model import ReferenceLatent
    from comfy_extras.nodes_model_advanced import ModelSamplingAuraFlow
    from comfy_extras.nodes_sd3 import EmptySD3LatentImage

    import nodes

    core = {
        n: getattr(nodes, n)
        for n in (
            "UNETLoader",
            "CLIPLoader",
            "VAELoader",
            "CLIPTextEncode",
            "KSampler",
            "VAEDecode",
            "VAEEncode",
            "LatentUpscale",
            "LoraLoaderModelOnly",
            "SaveImage",
        )
    }
    return {
        **core,
        "ModelSamplingAuraFlow": ModelSamplingAuraFlow,
        "EmptySD3LatentImage": EmptySD3LatentImage,
        "ReferenceLatent": ReferenceLatent,
    }


# Variants of the shipped workflow: (node id, input, value) changes and (node id, node) additions. Odd latent
# sizes and a batch of two; the model's own sampling (no ModelSamplingAuraFlow) with a multistep sampler; cfg 1
# with an ancestral one; reference latents.
VARIANTS = {
    "odd_size_batch2": [("58", "width", 120), ("58", "height", 72), ("58", "batch_size", 2), ("3", "seed", 3)],
    "model_sampling_flux_dpmpp_2m": [
        ("3", "model", ["37", 0]),
        ("3", "sampler_name", "dpmpp_2m"),
        ("3", "scheduler", "karras"),
        ("3", "steps", 5),
        ("3", "cfg", 4.0),
    ],
    "cfg1_euler_ancestral_beta": [
        ("3", "sampler_name", "euler_ancestral"),
        ("3", "scheduler", "beta"),
        ("3", "cfg", 1.0),
        ("3", "steps", 4),
        ("6", "text", "a (red:1.3) fox\nat dusk"),
    ],
    # A second pass whose positive prompt carries the first image, VAE-encoded, as a ReferenceLatent (twice:
    # the second reference at a smaller size, so the two take frame indices 1 and 2 at their own sizes).
    "reference_latents": [
        ("70", {"class_type": "VAEEncode", "inputs": {"pixels": ["8", 0], "vae": ["39", 0]}}),
        ("71", {"class_type": "ReferenceLatent", "inputs": {"conditioning": ["6", 0], "latent": ["70", 0]}}),
        (
            "74",
            {
                "class_type": "LatentUpscale",
                "inputs": {
                    "samples": ["70", 0],
                    "upscale_method": "nearest-exact",
                    "width": 72,
                    "height": 56,
                    "crop": "disabled",
                },
            },
        ),
        ("75", {"class_type": "ReferenceLatent", "inputs": {"conditioning": ["71", 0], "latent": ["74", 0]}}),
        (
            "72",
            {
                "class_type": "KSampler",
                "inputs": {
                    "model": ["66", 0],
                    "seed": 5,
                    "steps": 4,
                    "cfg": 2.5,
                    "sampler_name": "euler",
                    "scheduler": "simple",
                    "positive": ["75", 0],
                    "negative": ["7", 0],
                    "latent_image": ["58", 0],
                    "denoise": 1.0,
                },
            },
        ),
        ("73", {"class_type": "VAEDecode", "inputs": {"samples": ["72", 0], "vae": ["39", 0]}}),
        ("60", "images", ["73", 0]),
    ],
}


def run_workflow(prompt: dict) -> dict:
    """A workflow node by node in dependency order with ComfyUI's node classes; SaveImage is replaced by what
    it would write (255 * image, clipped, truncated to uint8), one entry per image of the batch."""
    classes = node_classes()
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
    sampler = prompt[prompt[save]["inputs"]["images"][0]]["inputs"]["samples"][0]  # what the saved images decode
    images = run(save)[0]
    return {
        "prompt": prompt,
        "latent_shape": list(run(sampler)[0]["samples"].shape),
        "pngs_rgb": [png_rgb(im) for im in images],
    }


def record_workflow() -> dict:
    return run_workflow(json.loads(open(WORKFLOW).read()))


def record_variants() -> dict:
    out = {}
    for name, changes in VARIANTS.items():
        prompt = json.loads(open(WORKFLOW).read())
        for change in changes:
            if len(change) == 2:  # a node added
                prompt[change[0]] = change[1]
            else:
                node, key, value = change
                prompt[node]["inputs"][key] = value
        out[name] = run_workflow(prompt)
    return out


def main() -> None:
    logging.getLogger().setLevel(logging.ERROR)  # ComfyUI lists the unused vision tower's missing weights
    torch.set_num_threads(1)
    tiny_widths()
    paths = {k: f"{MODELS}/{v}" for k, v in FILES.items()}
    for folder in ("diffusion_models", "text_encoders", "vae", "embeddings", "loras"):
        folder_paths.add_model_folder_path(folder, f"{MODELS}/{folder}", is_default=True)
    # The loader nodes, as the workflow loads the files (CLIPLoader gives the tokenizer its embeddings folder).
    classes = node_classes()
    (patcher,) = run_node(
        classes["UNETLoader"], {"unet_name": FILES["transformer"].split("/")[1], "weight_dtype": "default"}
    )
    (clip,) = run_node(classes["CLIPLoader"], {"clip_name": FILES["text_encoder"].split("/")[1], "type": "qwen_image"})
    (vae,) = run_node(classes["VAELoader"], {"vae_name": FILES["vae"].split("/")[1]})
    fixture = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_qwen_image.py",
        "files": {k: {"path": v, "sha256": sha256(paths[k])} for k, v in FILES.items()},
        "tokens": record_tokens(clip),
        "text": record_text(clip),
        "transformer": record_transformer(patcher),
        "denoised": record_denoised(patcher),
        "vae": record_vae(vae),
        "workflow": record_workflow(),
        "variants": record_variants(),
        "fp8": record_fp8(classes),
        "lora": record_lora(classes),
    }
    write_json(OUT, fixture)


if __name__ == "__main__":
    main()
