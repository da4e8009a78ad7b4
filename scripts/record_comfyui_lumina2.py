"""Record what ComfyUI 0.3.64 (commit a125cd84) computes for Lumina 2 / NetaYume on the tiny all-in-one checkpoint,
as the fixture tests/models/fixtures/comfyui_lumina2.json.

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_lumina2.py <fixture> <workspace> /work/main/workflows_json/netayume_lumina_t2i.json

ComfyUI 0.3.64 fixes the released sizes (the NextDiT's width 2304 with 24 heads and 8 kv heads, Gemma 2 2B's
config, the autoencoder's base width); this script gives its classes the tiny sizes read from the file's shapes and
changes nothing else: model detection (the checkpoint's prefixes), the Gemma tokenizer settings (the file's
SentencePiece model), Gemma 2, the NextDiT, model_base.Lumina2's conditioning, the samplers and the nodes are
ComfyUI's. Recorded: the token ids and conditioning of a few prompts (the template's two, CLIPTextEncodeLumina2's
system prompts, an empty one, one with weighted words; CLIPSetLastLayer's
layers); the NextDiT's raw output on seeded inputs (odd size, a batch of two timesteps), once more with the tiny LoRA
(LoraLoaderModelOnly); and
the shipped workflow (the web UI's NetaYume Lumina template on the tiny file) run node by node with 0.3.64's node
classes, SaveImage replaced by what it would write.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import sys

import torch

OUT, WORKSPACE, WORKFLOW = sys.argv[1:4]
sys.argv[1:] = ["--cpu"]
import comfy.cli_args

comfy.cli_args.args.cpu = True
import comfy.ldm.modules.diffusionmodules.model as ldm_vae
import comfy.model_detection
import comfy.sd
import comfy.text_encoders.llama
import comfy.utils
import folder_paths
import numpy as np

COMMIT = "a125cd84"
CHECKPOINT = "checkpoints/netayume-lumina-tiny.safetensors"
LORA = "loras/netayume-lumina-tiny-lora.safetensors"
LORA_STRENGTH = 0.8
TE = "text_encoders.gemma2_2b.transformer.model."
PROMPTS = [
    "a cat on a red sofa",
    "You are an assistant designed to generate superior images with the superior degree of image-text alignment "
    "based on textual prompts or user prompts. <Prompt Start> a girl in an orange grove, soft light",
    "",
    "a (red:1.3) cat on a (sofa:0.7), (masterpiece:1.2)",
]
CLIP_LAYERS = [-1, -3, -5]  # the tiny Gemma's last layer, its first, and beyond its depth (ComfyUI: the normed last)
LUMINA2_NODE = [("superior", "a girl in an orange grove, soft light"), ("alignment", "two cats")]
# (seed, latent shape, context rows, timestep(s))
CASES = {
    "one": (1, [1, 16, 8, 8], 5, [0.7]),
    "odd_size": (2, [1, 16, 7, 9], 3, [0.3]),
    "batch_two": (3, [2, 16, 6, 8], 4, [0.9, 0.2]),
}


def b64(t: torch.Tensor) -> dict:
    t = t.detach().to(torch.float32).contiguous()
    return {"shape": list(t.shape), "f32": base64.b64encode(t.numpy().tobytes()).decode()}


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def tiny_sizes() -> None:
    sd = comfy.utils.load_torch_file(f"{WORKSPACE}/models/{CHECKPOINT}")
    head = comfy.text_encoders.llama.Gemma2_2B_Config.head_dim
    sizes = {
        "vocab_size": sd[TE + "embed_tokens.weight"].shape[0],
        "hidden_size": sd[TE + "embed_tokens.weight"].shape[1],
        "intermediate_size": sd[TE + "layers.0.mlp.gate_proj.weight"].shape[0],
        "num_hidden_layers": len({k[len(TE) :].split(".")[1] for k in sd if k.startswith(TE + "layers.")}),
        "num_attention_heads": sd[TE + "layers.0.self_attn.q_proj.weight"].shape[0] // head,
        "num_key_value_heads": sd[TE + "layers.0.self_attn.k_proj.weight"].shape[0] // head,
    }
    config = comfy.text_encoders.llama.Gemma2_2B_Config

    @dataclasses.dataclass
    class TinyGemma2(config):
        pass

    comfy.text_encoders.llama.Gemma2_2B_Config = lambda **kw: TinyGemma2(**{**sizes, **kw})

    detect = comfy.model_detection.detect_unet_config

    def detect_tiny(state_dict, key_prefix, metadata=None):
        cfg = detect(state_dict, key_prefix, metadata=metadata)
        if cfg is not None and cfg.get("image_model") == "lumina2":
            dim = state_dict[f"{key_prefix}x_embedder.weight"].shape[0]
            head_dim = state_dict[f"{key_prefix}layers.0.attention.q_norm.weight"].shape[0]
            qkv = state_dict[f"{key_prefix}layers.0.attention.qkv.weight"].shape[0]
            cfg["dim"] = dim
            cfg["n_heads"] = dim // head_dim
            cfg["n_kv_heads"] = (qkv - dim) // 2 // head_dim
        return cfg

    comfy.model_detection.detect_unet_config = detect_tiny
    vae = {k[len("vae.") :]: v for k, v in sd.items() if k.startswith("vae.")}
    vae_sizes = {
        "ch": vae["encoder.conv_in.weight"].shape[0],
        "ch_mult": [1] * len({k.split(".")[2] for k in vae if k.startswith("encoder.down.")}),
        "num_res_blocks": len({k.split(".")[4] for k in vae if k.startswith("encoder.down.0.block.")}),
    }
    for name in ("Encoder", "Decoder"):
        cls = getattr(ldm_vae, name)
        setattr(ldm_vae, name, lambda cls=cls, **kw: cls(**{**kw, **vae_sizes}))


def classes() -> dict:
    from comfy_extras import nodes_lumina2, nodes_model_advanced, nodes_primitive, nodes_sd3, nodes_string

    import nodes

    out = dict(nodes.NODE_CLASS_MAPPINGS)
    for module in (nodes_lumina2, nodes_model_advanced, nodes_primitive, nodes_sd3, nodes_string):
        out.update(getattr(module, "NODE_CLASS_MAPPINGS", {}))
        for cls in vars(module).values():
            if isinstance(cls, type) and cls.__module__ == module.__name__ and hasattr(cls, "define_schema"):
                out[cls.define_schema().node_id] = cls
    return out


def run_node(cls, inputs: dict) -> tuple:
    if hasattr(cls, "FUNCTION"):
        return getattr(cls(), cls.FUNCTION)(**inputs)
    out = cls.execute(**inputs)  # a v3 node (io.ComfyNode)
    return tuple(out.result) if hasattr(out, "result") else out


def run_workflow(prompt: dict, node_classes: dict) -> dict:
    """The workflow node by node in dependency order with 0.3.64's node classes; SaveImage replaced by what it
    would write."""
    results: dict[str, tuple] = {}

    def run(node_id: str) -> tuple:
        if node_id not in results:
            node = prompt[node_id]
            inputs = {k: run(v[0])[v[1]] if isinstance(v, list) else v for k, v in node["inputs"].items()}
            if node["class_type"] == "SaveImage":
                results[node_id] = (inputs["images"],)
            else:
                results[node_id] = run_node(node_classes[node["class_type"]], inputs)
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
        "recorded_by": "scripts/record_comfyui_lumina2.py",
        "files": {p: sha256(f"{WORKSPACE}/models/{p}") for p in (CHECKPOINT, LORA)},
        "text": [],
        "lumina2_node": [],
        "clip_layers": [],
        "cases": {},
    }
    model, clip, _vae, _ = comfy.sd.load_checkpoint_guess_config(f"{WORKSPACE}/models/{CHECKPOINT}")
    for prompt in PROMPTS:
        tokens = clip.tokenize(prompt)
        ((cond, extra),) = clip.encode_from_tokens_scheduled(tokens)
        ids = [t for chunk in tokens["gemma2_2b"] for t, *_ in chunk]
        out["text"].append({"prompt": prompt, "ids": ids, "cond": b64(cond)})
    for layer in CLIP_LAYERS:  # CLIPSetLastLayer
        c = clip.clone()
        c.clip_layer(layer)
        ((cond, _),) = c.encode_from_tokens_scheduled(c.tokenize(PROMPTS[0]))
        out["clip_layers"].append({"layer": layer, "prompt": PROMPTS[0], "cond": b64(cond)})
    node_classes = classes()
    for system, user in LUMINA2_NODE:
        ((cond, _),) = run_node(
            node_classes["CLIPTextEncodeLumina2"], {"clip": clip, "user_prompt": user, "system_prompt": system}
        )[0]
        out["lumina2_node"].append({"system_prompt": system, "user_prompt": user, "cond": b64(cond)})
    net = model.model.diffusion_model
    width = net.cap_embedder[1].weight.shape[1]
    for name, (seed, shape, rows, t) in CASES.items():
        x, context = inputs(seed, shape, rows, width)
        with torch.no_grad():
            result = net(x, torch.tensor(t), context.expand(shape[0], -1, -1), num_tokens=rows)
        out["cases"][name] = {"out": b64(result)}
    # The "one" case again with the tiny LoRA at LORA_STRENGTH (LoraLoaderModelOnly's patches, applied).
    node_lora = node_classes["LoraLoaderModelOnly"]
    folder_paths.add_model_folder_path("loras", f"{WORKSPACE}/models/loras", is_default=True)
    (patched,) = run_node(
        node_lora, {"model": model, "lora_name": LORA.split("/", 1)[1], "strength_model": LORA_STRENGTH}
    )
    patched.patch_model()
    seed, shape, rows, t = CASES["one"]
    x, context = inputs(seed, shape, rows, width)
    with torch.no_grad():
        result = patched.model.diffusion_model(x, torch.tensor(t), context, num_tokens=rows)
    patched.unpatch_model()
    out["lora"] = {"case": "one", "strength": LORA_STRENGTH, "out": b64(result)}
    folder_paths.add_model_folder_path("checkpoints", f"{WORKSPACE}/models/checkpoints", is_default=True)
    with open(WORKFLOW) as f:
        out["workflow"] = run_workflow(json.load(f), node_classes)
    with open(OUT, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
