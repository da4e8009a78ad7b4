"""Record what upstream ComfyUI 0.10.0 computes with wan-tiny (nodes/models/wan_demo.py), as the fixture our Wan
support is tested on (tests/models/fixtures/comfyui_wan.json.xz).

Run inside ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here), after
the tiny files were written (`comfy-cluster demo-models`, or nodes.models.wan_demo.build_demo_wan) and the
workspace's example.png exists:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_wan.py /work/main/tests/models/fixtures/comfyui_wan.json.xz \\
        <models dir> <input dir> /work/main/workflows_json/wan22_i2v.json /work/main/workflows_json/wan22_5b.json

ComfyUI fixes widths of the released files that the tiny ones do not have: the Wan model's text width (4096,
umt5-xxl's), umt5-xxl's sizes (its umt5_config_xxl.json, and its detection by the 24th block) and the Wan 2.2
VAE's widths (160 and 256), and Wan 2.1 image-to-video's image width (CLIP-H's 1280); ComfyUI's
CLIPVisionLoader refuses the two-layer demo CLIP vision model, so it is built here as
scripts/record_comfyui_clip_vision.py builds it (ComfyUI's ClipVisionModel from a config of the demo's sizes). So
that its own classes load the tiny files, this script gives them the tiny sizes read from the files (wrappers
below) and changes nothing else: tokenizer (the file's own SentencePiece model), attention mask, model
detection, model sampling, latent format, the concat conditioning, samplers and nodes are ComfyUI's.
ComfyMathExpression is newer than 0.10.0: its one expression in the workflow (floor(a * b + 1)) is evaluated
here with Python's math.

Recorded: token ids and conditioning of prompts; each tiny diffusion model's raw output on seeded inputs (odd
sizes, a batch of two timesteps, Wan 2.2 5B's per-frame timesteps); one denoising step of the image-to-video
model through ComfyUI's BaseModel (the concat of mask and image latent included), and of Wan 2.2 5B under a
noise mask (its per-frame timesteps); the VAE's video encode and
decode, and the Wan 2.2 VAE's; the latent nodes' outputs (EmptyHunyuanLatentVideo, WanImageToVideo, WanFirstLastFrameToVideo,
Wan22ImageToVideoLatent); the shipped workflow (workflows_json/wan22_i2v.json) run node by node with
ComfyUI's node classes, with the template's LoRA switch off (as shipped) and on: the frames VAEDecode gives
(as SaveVideo would encode them, 255 * image truncated to uint8); and the Wan 2.2 5B template
(workflows_json/wan22_5b.json) the same way, as shipped (its LoadImage bypassed) and with its start image
(Wan22ImageToVideoLatent's noise mask, sampled with per-frame timesteps); and the 14B workflow with
WanFirstLastFrameToVideo (first frame the image, last its inverse) in place of WanImageToVideo, and on
Wan 2.1's image-to-video model with the image's CLIP vision output, and as text-to-video (EmptyHunyuanLatentVideo
and the Wan 2.1 text-to-video model).
Tensors are float32 base64; the files' sha256 are stored so the test knows it has the same files.
"""

from __future__ import annotations

import importlib
import json
import logging
import math
import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, png_rgb, run_node, sha256, write_json

OUT, MODELS, INPUT, WORKFLOW, WORKFLOW_5B = sys.argv[1:6]
comfyui_on_cpu()
import comfy.ldm.wan.model
import comfy.ldm.wan.vae2_2
import comfy.model_detection
import comfy.sd
import comfy.sd1_clip
import comfy.text_encoders.t5
import comfy.text_encoders.wan
import comfy.utils
import folder_paths

SOURCE = "ComfyUI 0.10.0 (hiddenswitch/ComfyUI 79cdbc81, upstream's commits)"
FILES = {
    "i2v_high": "diffusion_models/wan2.2_i2v_high_noise_14B_tiny.safetensors",
    "i2v_low": "diffusion_models/wan2.2_i2v_low_noise_14B_tiny.safetensors",
    "t2v": "diffusion_models/wan2.1_t2v_1.3B_tiny.safetensors",
    "i2v_21": "diffusion_models/wan2.1_i2v_480p_14B_tiny.safetensors",
    "clip_vision": "clip_vision/clip-vision-tiny.safetensors",
    "ti2v_5b": "diffusion_models/wan2.2_ti2v_5B_tiny.safetensors",
    "text_encoder": "text_encoders/umt5_xxl_tiny.safetensors",
    "vae": "vae/wan_2.1_vae_tiny.safetensors",
    "vae22": "vae/wan2.2_vae_tiny.safetensors",
    "lora_high": "loras/wan2.2_i2v_lightx2v_4steps_lora_tiny_high_noise.safetensors",
    "lora_low": "loras/wan2.2_i2v_lightx2v_4steps_lora_tiny_low_noise.safetensors",
}
PROMPTS = {
    "plain": "a red cube on a wooden table",
    "weighted": "a (red:1.3) cube, \\(escaped\\) [brackets]",
    "empty": "",
    "unicode": "café 東京",
}


def tiny_widths() -> None:
    """Give ComfyUI's Wan and umt5 classes the tiny files' sizes (see the module docstring)."""
    te = comfy.utils.load_torch_file(f"{MODELS}/{FILES['text_encoder']}")
    vocab, width = te["shared.weight"].shape
    heads = te["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"].shape[1]
    config = {
        "d_ff": te["encoder.block.0.layer.1.DenseReluDense.wi_0.weight"].shape[0],
        "d_kv": te["encoder.block.0.layer.0.SelfAttention.q.weight"].shape[0] // heads,
        "d_model": width,
        "dense_act_fn": "gelu_pytorch_tanh",
        "is_gated_act": True,
        "layer_norm_epsilon": 1e-6,
        "model_type": "umt5",
        "num_heads": heads,
        "relative_attention_num_buckets": 32,
        "num_layers": len({k.split(".")[2] for k in te if k.startswith("encoder.block.")}),
        "vocab_size": vocab,
        "pad_token_id": 0,
        "eos_token_id": 1,
    }

    class TinyUMT5(comfy.sd1_clip.SDClipModel):
        def __init__(self, device="cpu", layer="last", layer_idx=None, dtype=None, model_options=None):
            super().__init__(
                device=device,
                layer=layer,
                layer_idx=layer_idx,
                textmodel_json_config=config,
                dtype=dtype,
                special_tokens={"end": 1, "pad": 0},
                model_class=comfy.text_encoders.t5.T5,
                enable_attention_masks=True,
                zero_out_masked=True,
                model_options=model_options or {},
            )

    comfy.text_encoders.wan.UMT5XXlModel = TinyUMT5
    detect_te = comfy.sd.detect_te_model  # ComfyUI tells umt5-xxl by its 24th block

    def detect_te_tiny(sd):
        if "spiece_model" in sd and "encoder.final_layer_norm.weight" in sd:
            return comfy.sd.TEModel.T5_XXL
        return detect_te(sd)

    comfy.sd.detect_te_model = detect_te_tiny

    detect = comfy.model_detection.detect_unet_config

    def detect_tiny(state_dict, key_prefix, metadata=None):
        cfg = detect(state_dict, key_prefix, metadata=metadata)
        if cfg is not None and cfg.get("image_model") == "wan2.1":
            cfg["text_dim"] = state_dict[f"{key_prefix}text_embedding.0.weight"].shape[1]
        return cfg

    comfy.model_detection.detect_unet_config = detect_tiny

    image_width = comfy.utils.load_torch_file(f"{MODELS}/{FILES['i2v_21']}")["img_emb.proj.0.weight"].shape[0]
    mlp = comfy.ldm.wan.model.MLPProj  # ComfyUI builds Wan 2.1's image embedding for 1280-wide CLIP-H states
    comfy.ldm.wan.model.MLPProj = lambda in_dim, out_dim, **kw: mlp(image_width, out_dim, **kw)

    vae22 = comfy.utils.load_torch_file(f"{MODELS}/{FILES['vae22']}")
    widths = {"dim": vae22["encoder.conv1.weight"].shape[0], "dec_dim": vae22["decoder.head.0.gamma"].shape[0]}
    wan22 = comfy.ldm.wan.vae2_2.WanVAE
    comfy.ldm.wan.vae2_2.WanVAE = lambda **cfg: wan22(**{**cfg, **widths})


def node_classes() -> dict:
    import nodes

    core = {
        n: getattr(nodes, n)
        for n in (
            "UNETLoader",
            "CLIPLoader",
            "VAELoader",
            "CLIPTextEncode",
            "KSampler",
            "KSamplerAdvanced",
            "VAEDecode",
            "LoadImage",
            "LoraLoaderModelOnly",
            "ImageInvert",
            "CLIPVisionEncode",
        )
    }
    extra = {}
    for module, names in (
        ("nodes_model_advanced", ["ModelSamplingSD3"]),
        ("nodes_wan", ["WanImageToVideo", "WanFirstLastFrameToVideo", "Wan22ImageToVideoLatent"]),
        ("nodes_hunyuan", ["EmptyHunyuanLatentVideo"]),
        ("nodes_primitive", {"PrimitiveInt": "Int", "PrimitiveFloat": "Float", "PrimitiveBoolean": "Boolean"}),
    ):
        mod = importlib.import_module(f"comfy_extras.{module}")
        names = names if isinstance(names, dict) else {n: n for n in names}
        extra.update({n: getattr(mod, attr) for n, attr in names.items()})
    return {**core, **extra}


TINY_CLIP_VISION = {
    "hidden_act": "quick_gelu",
    "hidden_size": 32,
    "image_size": 224,
    "intermediate_size": 64,
    "layer_norm_eps": 1e-05,
    "model_type": "clip_vision_model",
    "num_attention_heads": 16,
    "num_channels": 3,
    "num_hidden_layers": 2,
    "patch_size": 14,
    "projection_dim": 32,
}


def load_clip_vision(clip_name: str):
    import tempfile

    import comfy.clip_vision

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(TINY_CLIP_VISION, f)
    model = comfy.clip_vision.ClipVisionModel(f.name)
    missing, unexpected = model.load_sd(comfy.utils.load_torch_file(f"{MODELS}/clip_vision/{clip_name}"))
    assert not missing and not unexpected, (missing, unexpected)
    return (model,)


def math_expression(inputs: dict) -> tuple:
    """ComfyMathExpression (newer than 0.10.0) for the workflow's one expression."""
    values = {k.split(".", 1)[1]: v for k, v in inputs.items() if k.startswith("values.")}
    expr = inputs["expression"]
    if expr.replace(" ", "") != "floor(a*b+1)":
        raise ValueError(f"the recorder evaluates only floor(a * b + 1), not {expr!r}")
    value = math.floor(values["a"] * values["b"] + 1)
    return float(value), int(value)


def run_workflow(prompt: dict) -> dict:
    """The workflow node by node with ComfyUI's classes; the switches evaluate only their chosen branch, as
    ComfyUI's lazy inputs do. Returns VAEDecode's frames (what CreateVideo / SaveVideo encode)."""
    classes = node_classes()
    results: dict[str, tuple] = {}

    def value(v):
        return run(v[0])[v[1]] if isinstance(v, list) else v

    def run(node_id: str) -> tuple:
        if node_id not in results:
            node = prompt[node_id]
            kind, raw = node["class_type"], node["inputs"]
            if kind == "ComfySwitchNode":
                switch = value(raw["switch"])
                results[node_id] = (value(raw["on_true" if switch else "on_false"]),)
            elif kind == "ComfyMathExpression":
                results[node_id] = math_expression({k: value(v) for k, v in raw.items()})
            elif kind == "CLIPVisionLoader":
                results[node_id] = load_clip_vision(value(raw["clip_name"]))
            elif kind in ("CreateVideo", "SaveVideo"):
                results[node_id] = (value(raw.get("images", raw.get("video"))),)
            else:
                results[node_id] = run_node(classes[kind], {k: value(v) for k, v in raw.items()})
        return results[node_id]

    (decode,) = [k for k, v in prompt.items() if v["class_type"] == "VAEDecode" and v["inputs"]["samples"][0] in prompt]
    frames = run(decode)[0]
    sampler = prompt[decode]["inputs"]["samples"][0]
    return {"latent_shape": list(run(sampler)[0]["samples"].shape), "frames": png_rgb(frames)}


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def record_text(clip) -> dict:
    out = {}
    for name, text in PROMPTS.items():
        tokens = clip.tokenize(text)
        cond = clip.encode_from_tokens(tokens, return_pooled=True, return_dict=True)
        out[name] = {
            "prompt": text,
            "ids": [t for t, *_ in tokens["umt5xxl"][0]],
            "cond": b64(cond["cond"]),
            "pooled_is_none": cond["pooled_output"] is None,
        }
    return out


# (model, x shape, timesteps, context tokens); the 5B case gives one timestep per latent frame
TRANSFORMER_CASES = [
    ("t2v", [1, 16, 2, 6, 5], [500.0], 512),
    ("t2v", [2, 16, 1, 4, 4], [999.0, 12.5], 512),
    ("i2v_high", [1, 36, 2, 4, 6], [700.0], 512),
    ("ti2v_5b", [1, 48, 3, 4, 4], [[0.0, 600.0, 600.0]], 512),
]


def record_transformers(patchers: dict) -> list[dict]:
    out = []
    for k, (name, shape, steps, tokens) in enumerate(TRANSFORMER_CASES):
        x = seeded(100 + k, *shape)
        context = seeded(200 + k, shape[0], tokens, 32)
        t = torch.tensor(steps)
        y = patchers[name].model.diffusion_model(x, t, context)
        out.append({"model": name, "x": b64(x), "t": steps, "context": b64(context), "out": b64(y)})
    return out


def record_i2v_step(patcher, vae, clip) -> dict:
    """One denoising evaluation of the image-to-video model on WanImageToVideo's conditioning: ComfyUI's
    concat (mask + image latent in model space) and apply_model (sigma -> timestep, output -> denoised)."""
    classes = node_classes()
    pos = clip.encode_from_tokens_scheduled(clip.tokenize("a red cube on a wooden table"))
    neg = clip.encode_from_tokens_scheduled(clip.tokenize(""))
    image = torch.rand(2, 40, 56, 3, generator=torch.Generator().manual_seed(5))
    pos, _, latent = run_node(
        classes["WanImageToVideo"],
        {
            "positive": pos,
            "negative": neg,
            "vae": vae,
            "width": 48,
            "height": 32,
            "length": 9,
            "batch_size": 1,
            "start_image": image,
        },
    )
    opts = pos[0][1]
    x = seeded(7, *latent["samples"].shape)
    sigma = torch.tensor([0.8])
    model = patcher.model
    concat = model.concat_cond(
        noise=x,
        concat_latent_image=opts["concat_latent_image"],
        concat_mask=opts["concat_mask"],
        device=torch.device("cpu"),
    )
    denoised = model.apply_model(x, sigma, c_concat=concat, c_crossattn=pos[0][0])
    return {
        "image": b64(image),
        "x": b64(x),
        "sigma": 0.8,
        "context": b64(pos[0][0]),
        "concat": b64(concat),
        "denoised": b64(denoised),
    }


def record_ti2v_step(patcher) -> dict:
    """One denoising evaluation of Wan 2.2 5B under a noise mask that keeps the first latent frame: ComfyUI's
    WAN22.process_timestep gives that frame timestep 0."""
    x, context = seeded(9, 1, 48, 3, 4, 4), seeded(10, 1, 512, 32)
    mask = torch.ones(1, 48, 3, 4, 4)
    mask[:, :, 0] = 0.0
    denoised = patcher.model.apply_model(x, torch.tensor([0.7]), c_crossattn=context, denoise_mask=mask)
    return {"x": b64(x), "context": b64(context), "mask": b64(mask), "sigma": 0.7, "denoised": b64(denoised)}


def record_vae(vae, channels: int = 16, scale: int = 8) -> dict:
    video = torch.rand(5, 64, 48, 3, generator=torch.Generator().manual_seed(3))
    latent = seeded(4, 1, channels, 2, 64 // scale, 48 // scale)
    return {
        "video": b64(video),
        "encoded": b64(vae.encode(video)),
        "latent": b64(latent),
        "decoded": b64(vae.decode(latent)),
    }


def start_image_variant(prompt: dict) -> dict:
    """The 5B template with its bypassed LoadImage switched on (the workspace's example.png as start image)."""
    out = json.loads(json.dumps(prompt))
    (latent,) = [k for k, v in out.items() if v["class_type"] == "Wan22ImageToVideoLatent"]
    out["56"] = {"class_type": "LoadImage", "inputs": {"image": "example.png"}}
    out[latent]["inputs"]["start_image"] = ["56", 0]
    return out


def first_last_variant(prompt: dict) -> dict:
    """The 14B image-to-video workflow with WanFirstLastFrameToVideo in place of WanImageToVideo: the image as
    first frame, its inverse as last."""
    out = json.loads(json.dumps(prompt))
    (node,) = [k for k, v in out.items() if v["class_type"] == "WanImageToVideo"]
    out[node]["class_type"] = "WanFirstLastFrameToVideo"
    out["170"] = {"class_type": "ImageInvert", "inputs": {"image": out[node]["inputs"]["start_image"]}}
    out[node]["inputs"]["end_image"] = ["170", 0]
    return out


def clip_vision_variant(prompt: dict) -> dict:
    """The 14B image-to-video workflow on Wan 2.1's image-to-video model (both experts), WanImageToVideo given
    the start image's CLIP vision output (CLIPVisionEncode, crop none, as Wan 2.1's template)."""
    out = json.loads(json.dumps(prompt))
    for node in out.values():
        if node["class_type"] == "UNETLoader":
            node["inputs"]["unet_name"] = FILES["i2v_21"].split("/")[1]
    (node,) = [k for k, v in out.items() if v["class_type"] == "WanImageToVideo"]
    out["180"] = {"class_type": "CLIPVisionLoader", "inputs": {"clip_name": FILES["clip_vision"].split("/")[1]}}
    out["181"] = {
        "class_type": "CLIPVisionEncode",
        "inputs": {"clip_vision": ["180", 0], "crop": "none", "image": out[node]["inputs"]["start_image"]},
    }
    out[node]["inputs"]["clip_vision_output"] = ["181", 0]
    return out


def text_variant(prompt: dict) -> dict:
    """The 14B workflow as text-to-video (the 14B text-to-video template's shape): the Wan 2.1 text-to-video
    model for both experts, EmptyHunyuanLatentVideo's latent, the prompts straight to the samplers."""
    out = json.loads(json.dumps(prompt))
    (node,) = [k for k, v in out.items() if v["class_type"] == "WanImageToVideo"]
    i2v = out.pop(node)
    out.pop(i2v["inputs"]["start_image"][0])  # the LoadImage
    out[node] = {
        "class_type": "EmptyHunyuanLatentVideo",
        "inputs": {k: i2v["inputs"][k] for k in ("width", "height", "length", "batch_size")},
    }
    for v in out.values():
        if v["class_type"] == "UNETLoader":
            v["inputs"]["unet_name"] = FILES["t2v"].split("/")[1]
        for key, side in (("positive", 0), ("negative", 1), ("latent_image", 2)):
            if v["inputs"].get(key) == [node, side]:
                v["inputs"][key] = i2v["inputs"][key] if key != "latent_image" else [node, 0]
    return out


def record_latent_nodes(vae, clip, vae22) -> dict:
    classes = node_classes()
    pos = clip.encode_from_tokens_scheduled(clip.tokenize("a cat"))
    neg = clip.encode_from_tokens_scheduled(clip.tokenize(""))
    start = torch.rand(1, 50, 70, 3, generator=torch.Generator().manual_seed(8))
    end = torch.rand(2, 30, 30, 3, generator=torch.Generator().manual_seed(9))
    out = {"empty_hunyuan": [], "start_image": b64(start), "end_image": b64(end)}
    for width, height, length, batch in ((848, 480, 25, 1), (64, 48, 1, 2), (32, 16, 7, 1)):
        (latent,) = run_node(
            classes["EmptyHunyuanLatentVideo"],
            {"width": width, "height": height, "length": length, "batch_size": batch},
        )
        out["empty_hunyuan"].append({"args": [width, height, length, batch], "shape": list(latent["samples"].shape)})
    p, _, latent = run_node(
        classes["WanImageToVideo"],
        {
            "positive": pos,
            "negative": neg,
            "vae": vae,
            "width": 48,
            "height": 32,
            "length": 13,
            "batch_size": 2,
            "start_image": start,
        },
    )
    out["wan_i2v"] = {
        "latent_shape": list(latent["samples"].shape),
        "concat_latent_image": b64(p[0][1]["concat_latent_image"]),
        "concat_mask": b64(p[0][1]["concat_mask"]),
    }
    p, _, latent = run_node(
        classes["WanFirstLastFrameToVideo"],
        {
            "positive": pos,
            "negative": neg,
            "vae": vae,
            "width": 32,
            "height": 32,
            "length": 9,
            "batch_size": 1,
            "start_image": start,
            "end_image": end,
        },
    )
    out["wan_flf"] = {
        "latent_shape": list(latent["samples"].shape),
        "concat_latent_image": b64(p[0][1]["concat_latent_image"]),
        "concat_mask": b64(p[0][1]["concat_mask"]),
    }
    (latent,) = run_node(
        classes["Wan22ImageToVideoLatent"], {"vae": vae, "width": 96, "height": 64, "length": 9, "batch_size": 3}
    )
    out["wan22_latent"] = {"shape": list(latent["samples"].shape), "keys": sorted(latent)}
    (latent,) = run_node(
        classes["Wan22ImageToVideoLatent"],
        {"vae": vae22, "width": 96, "height": 64, "length": 9, "batch_size": 2, "start_image": start},
    )
    out["wan22_latent_start"] = {"samples": b64(latent["samples"]), "noise_mask": b64(latent["noise_mask"])}
    return out


def main() -> None:
    logging.getLogger().setLevel(logging.ERROR)
    torch.set_num_threads(1)
    tiny_widths()
    for folder in ("diffusion_models", "text_encoders", "vae", "loras"):
        folder_paths.add_model_folder_path(folder, f"{MODELS}/{folder}", is_default=True)
    folder_paths.set_input_directory(INPUT)
    classes = node_classes()
    patchers = {
        name: run_node(classes["UNETLoader"], {"unet_name": FILES[name].split("/")[1], "weight_dtype": "default"})[0]
        for name in ("t2v", "i2v_high", "ti2v_5b")
    }
    (clip,) = run_node(classes["CLIPLoader"], {"clip_name": FILES["text_encoder"].split("/")[1], "type": "wan"})
    (vae,) = run_node(classes["VAELoader"], {"vae_name": FILES["vae"].split("/")[1]})
    (vae22,) = run_node(classes["VAELoader"], {"vae_name": FILES["vae22"].split("/")[1]})
    with open(WORKFLOW) as f:
        prompt = json.load(f)
    with_lora = json.loads(json.dumps(prompt))
    (switch,) = [k for k, v in prompt.items() if v["class_type"] == "PrimitiveBoolean"]
    with_lora[switch]["inputs"]["value"] = True
    with open(WORKFLOW_5B) as f:
        prompt_5b = json.load(f)
    fixture = {
        "source": SOURCE,
        "recorded_by": "scripts/record_comfyui_wan.py",
        "files": {k: {"path": v, "sha256": sha256(f"{MODELS}/{v}")} for k, v in FILES.items()},
        "text": record_text(clip),
        "transformer": record_transformers(patchers),
        "i2v_step": record_i2v_step(patchers["i2v_high"], vae, clip),
        "vae": record_vae(vae),
        "ti2v_step": record_ti2v_step(patchers["ti2v_5b"]),
        "vae22": record_vae(vae22, 48, 16),
        "latent_nodes": record_latent_nodes(vae, clip, vae22),
        "workflow": {"prompt": prompt, **run_workflow(prompt)},
        "workflow_lora": {"prompt": with_lora, **run_workflow(with_lora)},
        "workflow_clip_vision": {"prompt": clip_vision_variant(prompt), **run_workflow(clip_vision_variant(prompt))},
        "workflow_text": {"prompt": text_variant(prompt), **run_workflow(text_variant(prompt))},
        "workflow_first_last": {"prompt": first_last_variant(prompt), **run_workflow(first_last_variant(prompt))},
        "workflow_5b": {"prompt": prompt_5b, **run_workflow(prompt_5b)},
        "workflow_5b_start_image": {
            "prompt": start_image_variant(prompt_5b),
            **run_workflow(start_image_variant(prompt_5b)),
        },
    }
    write_json(OUT, fixture)


if __name__ == "__main__":
    main()
