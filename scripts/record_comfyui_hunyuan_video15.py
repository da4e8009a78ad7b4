"""Record what upstream ComfyUI 0.10.0 (commit 79cdbc81 of hiddenswitch/ComfyUI) computes with hunyuan-video-1.5-tiny,
as the fixture our HunyuanVideo 1.5 support is tested on (tests/models/fixtures/comfyui_hunyuan_video15.json.xz).

Run inside that ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here), after
`comfy-cluster demo-models` (or nodes.models.hunyuan_video15_demo.build_demo_hunyuan_video15) wrote the tiny files:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_hunyuan_video15.py tests/models/fixtures/comfyui_hunyuan_video15.json \\
        <models> <input folder with example.png> /work/main/workflows_json/hunyuan_video15_i2v.json \\
        /work/main/workflows_json/hunyuan_video15_t2v.json

ComfyUI reads the transformer's widths from the file but fixes some: supported_models.HunyuanVideo15 asks vision_in_dim
1152 (SigLIP so400m's width; the tiny image projection takes sigclip-vision-tiny's 32), the ByT5 mapper is
1472 -> 2048 wide and the ByT5 encoder ByT5-small's, the VAE is 128..1024 wide with two resnets per stage. So that
its own classes take the tiny files, this script gives HunyuanVideo15's unet_config the file's vision width, the
mapper and ByT5 the files' widths, its vae_refiner Encoder and Decoder the tiny file's stage widths and resnet
count, and changes nothing else (model detection, model_base.HunyuanVideo15 with its concat_cond
and extra_conds, FLOW sampling at shift 7, the latent format, comfy/sd.py's VAE wrapper are ComfyUI's).

Recorded: the transformer's raw output on seeded inputs (text only; text, ByT5 glyph states and SigLIP states in a
batch of two timesteps); the whole model's denoised prediction from the conditioning an image-to-video node gives
(image latent, mask, clip vision output); the VAE's decode of a 3-frame latent and encode of a 5-frame clip and of
one image; EmptyHunyuanVideo15Latent and HunyuanVideo15ImageToVideo's outputs; DualCLIPLoader type
hunyuan_video_15's conditioning; and the shipped image- and text-to-video workflows (the 720p templates on the tiny files) run
node by node with 0.10.0's classes, its VAEDecode frames (what CreateVideo / SaveVideo encode). Inputs are seeded draws the test
makes again (their sums are stored); outputs above MAX_RECORDED_VALUES are kept as strided grids.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import torch
from comfyui_recording import MAX_RECORDED_VALUES, b64, comfyui_on_cpu, png_rgb, run_node, sha256, write_json

OUT, MODELS, INPUTS, WORKFLOW, WORKFLOW_T2V = sys.argv[1:6]
comfyui_on_cpu()
import comfy.ldm.hunyuan_video.vae_refiner  # noqa: E402
import comfy.sd  # noqa: E402
import comfy.text_encoders.llama  # noqa: E402
import comfy.utils  # noqa: E402
import comfy_extras.nodes_hunyuan as nodes_hunyuan  # noqa: E402

COMMIT = "79cdbc81"
FILES = {
    "transformer": "diffusion_models/hunyuanvideo1.5_tiny.safetensors",
    "vae": "vae/hunyuanvideo15_vae_tiny.safetensors",
    "text_encoder": "text_encoders/qwen_2.5_vl_7b_hunyuan_video15_tiny.safetensors",
    # hunyuan-image-2.1-tiny's glyph ByT5 (nodes.models.hunyuan_image_demo), the same ByT5-small glyph reading
    "byt5": "text_encoders/byt5_small_glyphxl_tiny.safetensors",
    "latent_upsampler": "latent_upscale_models/hunyuanvideo15_latent_upsampler_1080p_tiny.safetensors",
}
HEAD = 128  # ComfyUI's Qwen2.5-VL head width
PROMPTS = {
    # the 720p image-to-video template's prompts (its parentheses are ComfyUI's weight syntax)
    "template": "A feathered young dinosaur (with ruffled brown-and-white plumage, sharp claws, and a spiky crested "
    "head) moves alertly through a sun-dappled, dense coniferous forest.",
    "empty": "",
    "plain": "a paper airplane gliding between skyscrapers",
    "quoted": 'a neon sign that says "OPEN" flickers over a wet street, \u201cbienvenue\u201d below',
}
TEXT_WIDTH = 32  # the tiny Qwen2.5-VL's (nodes.models.qwen_image_demo)
VISION_WIDTH = 32  # sigclip-vision-tiny's (nodes.models.redux_demo)
BYT5_WIDTH = 32  # the tiny glyph ByT5's (its mapper's input; ComfyUI fixes 1472)


def tiny_vae_widths(vae_sd: dict) -> None:
    """Give ComfyUI's 1.5 VAE classes the tiny file's stage widths and resnets per stage."""
    stages = sorted({int(k.split(".")[2]) for k in vae_sd if k.startswith("encoder.down.")})
    widths = [vae_sd[f"encoder.down.{i}.block.0.conv1.conv.weight"].shape[0] for i in stages]
    blocks = len({k.split(".")[4] for k in vae_sd if k.startswith("encoder.down.0.block.")})
    module = comfy.ldm.hunyuan_video.vae_refiner
    for name in ("Encoder", "Decoder"):
        cls = getattr(module, name)
        setattr(
            module,
            name,
            lambda cls=cls, **cfg: cls(**{**cfg, "block_out_channels": widths, "num_res_blocks": blocks}),
        )


def tiny_text_sizes(te: dict) -> None:
    """Give ComfyUI's Qwen2.5-VL-7B config the tiny file's sizes and tell it by the tiny width (as
    scripts/record_comfyui_hunyuan_image.py does)."""
    vocab, hidden = te["model.embed_tokens.weight"].shape
    sizes = dict(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=len({k.split(".")[2] for k in te if k.startswith("model.layers.")}),
        intermediate_size=te["model.layers.0.mlp.gate_proj.weight"].shape[0],
        num_attention_heads=te["model.layers.0.self_attn.q_proj.weight"].shape[0] // HEAD,
        num_key_value_heads=te["model.layers.0.self_attn.k_proj.weight"].shape[0] // HEAD,
    )
    config = comfy.text_encoders.llama.Qwen25_7BVLI_Config
    comfy.text_encoders.llama.Qwen25_7BVLI_Config = lambda **kw: config(**{**sizes, **kw})
    detect_te = comfy.sd.detect_te_model

    def detect_te_tiny(sd):
        if sd.get("model.layers.0.post_attention_layernorm.weight", torch.empty(0)).shape[0] == hidden:
            return comfy.sd.TEModel.QWEN25_7B
        return detect_te(sd)

    comfy.sd.detect_te_model = detect_te_tiny


def tiny_byt5(byt5: dict, dit: dict) -> None:
    """Give ComfyUI's ByT5 glyph encoder the tiny file's config (its byt5_config_small_glyph.json at the file's
    sizes: 8-wide heads) and the DiT's ByT5 mapper the file's widths (ComfyUI fixes 1472 -> 2048), as
    scripts/record_comfyui_hunyuan_image.py does."""
    import os
    import tempfile

    import comfy.ldm.hunyuan_video.model
    import comfy.sd1_clip
    import comfy.text_encoders.hunyuan_image
    import comfy.text_encoders.t5

    config = {
        "d_ff": byt5["encoder.block.0.layer.1.DenseReluDense.wo.weight"].shape[1],
        "d_kv": 8,
        "d_model": byt5["shared.weight"].shape[1],
        "dense_act_fn": "gelu_pytorch_tanh",
        "is_gated_act": True,
        "layer_norm_epsilon": 1e-6,
        "model_type": "t5",
        "num_heads": byt5["encoder.block.0.layer.0.SelfAttention.q.weight"].shape[0] // 8,
        "num_layers": len({k.split(".")[2] for k in byt5 if k.startswith("encoder.block.")}),
        "relative_attention_num_buckets": 32,
        "vocab_size": byt5["shared.weight"].shape[0],
    }
    path = os.path.join(tempfile.mkdtemp(), "byt5_config_tiny.json")  # outside the repository
    with open(path, "w") as f:
        json.dump(config, f)

    class TinyByT5(comfy.sd1_clip.SDClipModel):  # ComfyUI's ByT5SmallModel arguments, the tiny config
        def __init__(self, device="cpu", layer="last", layer_idx=None, dtype=None, model_options=None):
            super().__init__(
                device=device,
                layer=layer,
                layer_idx=layer_idx,
                textmodel_json_config=path,
                dtype=dtype,
                model_options=model_options or {},
                special_tokens={"end": 1, "pad": 0},
                model_class=comfy.text_encoders.t5.T5,
                enable_attention_masks=True,
                zero_out_masked=True,
            )

    comfy.text_encoders.hunyuan_image.ByT5SmallModel = TinyByT5
    hidden, width_in = dit["byt5_in.fc1.weight"].shape
    mapper = comfy.ldm.hunyuan_video.model.ByT5Mapper
    comfy.ldm.hunyuan_video.model.ByT5Mapper = lambda in_dim, out_dim, hidden_dim, out_dim1, **kw: mapper(
        width_in, hidden, hidden, out_dim1, **kw
    )


def record_text(clip) -> dict:
    """DualCLIPLoader type hunyuan_video_15's tokens and conditioning (ByT5 states of the quoted text beside)."""
    out = {}
    for name, text in PROMPTS.items():
        tokens = clip.tokenize(text)
        result = clip.encode_from_tokens(tokens, return_pooled=True, return_dict=True)
        out[name] = {
            "prompt": text,
            "ids": [t for t, *_ in tokens["qwen25_7b"][0]],
            "byt5_ids": [t for t, *_ in tokens["byt5"][0]] if "byt5" in tokens else None,
            "cond": b64(result["cond"]),
            "byt5": b64(result["conditioning_byt5small"]) if "conditioning_byt5small" in result else None,
            "extra_keys": sorted(k for k in result if k not in ("cond", "pooled_output")),
        }
    return out


def tiny_vision_width(dit_sd: dict) -> None:
    """Let supported_models.HunyuanVideo15 (and its SR model) match the tiny file's image projection width."""
    import comfy.supported_models

    width = dit_sd["vision_in.proj.0.weight"].shape[0]
    for cls in (comfy.supported_models.HunyuanVideo15, comfy.supported_models.HunyuanVideo15_SR_Distilled):
        cls.unet_config = {**cls.unet_config, "vision_in_dim": width}


def draws(seed: int, *shapes: list[int]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g) for s in shapes]


def record_transformer(patcher) -> list[dict]:
    net = patcher.model.diffusion_model
    cases = []
    for seed, shape, tokens, glyphs, vision, t in (
        (1, [1, 65, 2, 3, 4], 7, 0, 0, [700.0]),
        (2, [2, 65, 3, 2, 3], 5, 4, 6, [300.0, 900.0]),
    ):
        x, context, byt5, clip = draws(
            seed,
            shape,
            [shape[0], tokens, TEXT_WIDTH],
            [shape[0], glyphs, BYT5_WIDTH],
            [shape[0], vision, VISION_WIDTH],
        )
        with torch.no_grad():
            out = net(
                x,
                torch.tensor(t),
                context,
                txt_byt5=byt5 if glyphs else None,
                clip_fea=clip if vision else None,
            )
        cases.append(
            {
                "seed": seed,
                "shape": shape,
                "tokens": tokens,
                "glyphs": glyphs,
                "vision": vision,
                "timesteps": t,
                "input_sum": float(x.sum() + context.sum() + byt5.sum() + clip.sum()),
                "out": b64(out, MAX_RECORDED_VALUES),
            }
        )
    return cases


def record_denoised(patcher) -> dict:
    model = patcher.model
    x, context, image, clip = draws(3, [1, 32, 3, 2, 3], [1, 6, TEXT_WIDTH], [1, 32, 3, 2, 3], [1, 5, VISION_WIDTH])
    mask = torch.ones(1, 1, 3, 2, 3)
    mask[:, :, :1] = 0.0
    conds = model.extra_conds(
        noise=x,
        device=torch.device("cpu"),
        concat_latent_image=image,
        concat_mask=mask,
        clip_vision_output=SimpleNamespace(last_hidden_state=clip),
        cross_attn=context,
        pooled_output=None,
    )
    kwargs = {k: v.cond for k, v in conds.items()}
    with torch.no_grad():
        denoised = model.apply_model(x, torch.tensor([0.6]), **kwargs)
    ms = patcher.get_model_object("model_sampling")
    sigmas = torch.tensor([1.0, 0.75, 0.5, 0.1, 0.01])
    return {
        "seed": 3,
        "input_sum": float(x.sum() + context.sum() + image.sum() + clip.sum()),
        "sigma": 0.6,
        "cond_keys": sorted(conds),
        "c_concat": b64(kwargs["c_concat"]),
        "denoised": b64(denoised),
        "process_in": b64(model.process_latent_in(x)),
        "sampling": {
            "class": type(ms).__name__,
            "sigmas": sigmas.tolist(),
            "timesteps": ms.timestep(sigmas).tolist(),
        },
    }


def record_vae(vae) -> dict:
    g = torch.Generator().manual_seed(5)
    latent = torch.randn([1, 32, 3, 2, 2], generator=g)
    clip = torch.rand([5, 32, 48, 3], generator=g)
    image = torch.rand([1, 48, 32, 3], generator=g)
    return {
        "seed": 5,
        "input_sum": float(latent.sum() + clip.sum() + image.sum()),
        "decoded": b64(vae.decode(latent), 8192),  # a strided grid: the fixture stays small
        "encoded_clip": b64(vae.encode(clip)),
        "encoded_image": b64(vae.encode(image)),
    }


def record_nodes(vae) -> dict:
    g = torch.Generator().manual_seed(8)
    start = torch.rand([2, 40, 56, 3], generator=g)
    cond = torch.randn([1, 4, TEXT_WIDTH], generator=g)
    clip_out = SimpleNamespace(last_hidden_state=torch.randn([1, 5, VISION_WIDTH], generator=g))
    empty = nodes_hunyuan.EmptyHunyuanVideo15Latent.execute(48, 32, 9, 2)[0]["samples"]
    pos, neg, latent = nodes_hunyuan.HunyuanVideo15ImageToVideo.execute(
        [[cond, {}]], [[cond * 2, {}]], vae, 64, 32, 9, 1, start_image=start, clip_vision_output=clip_out
    )
    return {
        "seed": 8,
        "input_sum": float(start.sum() + cond.sum() + clip_out.last_hidden_state.sum()),
        "empty_shape": list(empty.shape),
        "latent_shape": list(latent["samples"].shape),
        "positive_keys": sorted(pos[0][1]),
        "concat_latent_image": b64(pos[0][1]["concat_latent_image"]),
        "concat_mask": b64(pos[0][1]["concat_mask"]),
        "negative_same_image": bool(torch.equal(neg[0][1]["concat_latent_image"], pos[0][1]["concat_latent_image"])),
        "super_resolution": record_super_resolution(vae, start, cond, clip_out),
    }


def record_latent_upscale() -> dict:
    """LatentUpscaleModelLoader on the 1080p upsampler and HunyuanVideo15LatentUpscaleWithModel on a seeded latent,
    at a given size and with the width following the aspect."""
    import folder_paths

    folder_paths.add_model_folder_path("latent_upscale_models", f"{MODELS}/latent_upscale_models", is_default=True)
    name = FILES["latent_upsampler"].split("/", 1)[1]
    (model,) = nodes_hunyuan.LatentUpscaleModelLoader.execute(name)
    latent = torch.randn([1, 32, 2, 3, 4], generator=torch.Generator().manual_seed(11))
    out = {"input_sum": float(latent.sum()), "cases": []}
    for method, width, height, crop in (("bilinear", 128, 96, "disabled"), ("nearest-exact", 0, 80, "center")):
        (result,) = nodes_hunyuan.HunyuanVideo15LatentUpscaleWithModel.execute(
            model, {"samples": latent}, method, width, height, crop
        )
        out["cases"].append({"args": [method, width, height, crop], "samples": b64(result["samples"])})
    return out


def record_super_resolution(vae, start, cond, clip_out) -> dict:
    """HunyuanVideo15SuperResolution on a seeded low-resolution latent, without and with start frames."""
    low = torch.randn([1, 32, 2, 3, 2], generator=torch.Generator().manual_seed(9))
    out = {"input_sum": float(low.sum())}
    for name, kwargs in (
        ("latent_only", {}),
        ("start_image", {"vae": vae, "start_image": start, "clip_vision_output": clip_out}),
    ):
        pos, neg, latent = nodes_hunyuan.HunyuanVideo15SuperResolution.execute(
            [[cond, {}]], [[cond * 2, {}]], {"samples": low}, 0.35, **kwargs
        )
        out[name] = {
            "positive_keys": sorted(pos[0][1]),
            "concat_latent_image": b64(pos[0][1]["concat_latent_image"]),
            "noise_augmentation": pos[0][1]["noise_augmentation"],
            "latent_passes": latent["samples"] is low,
        }
    return out


TINY_SIGLIP_CONFIG = {  # sigclip-vision-tiny's sizes in ComfyUI's clip_vision_siglip_384 config (as
    # scripts/record_comfyui_siglip_redux.py gives them)
    "num_channels": 3,
    "hidden_act": "gelu_pytorch_tanh",
    "hidden_size": 32,
    "image_size": 384,
    "intermediate_size": 64,
    "model_type": "siglip_vision_model",
    "num_attention_heads": 16,
    "num_hidden_layers": 27,
    "patch_size": 14,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
}


def load_tiny_siglip(name: str):
    import json
    import tempfile

    import comfy.clip_vision

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(TINY_SIGLIP_CONFIG, f)
    model = comfy.clip_vision.ClipVisionModel(f.name)
    missing, unexpected = model.load_sd(comfy.utils.load_torch_file(f"{MODELS}/clip_vision/{name}"))
    assert not missing and not unexpected, (missing, unexpected)
    return (model,)


def workflow_classes() -> dict:
    import importlib

    import nodes

    core = ["UNETLoader", "VAELoader", "DualCLIPLoader", "CLIPTextEncode", "CLIPVisionEncode", "LoadImage", "VAEDecode"]
    classes = {n: getattr(nodes, n) for n in core}
    for module, names in (
        ("nodes_hunyuan", ["HunyuanVideo15ImageToVideo", "EmptyHunyuanVideo15Latent"]),
        ("nodes_model_advanced", ["ModelSamplingSD3"]),
        (
            "nodes_custom_sampler",
            ["BasicScheduler", "RandomNoise", "KSamplerSelect", "CFGGuider", "SamplerCustomAdvanced"],
        ),
    ):
        mod = importlib.import_module(f"comfy_extras.{module}")
        classes.update({n: getattr(mod, n) for n in names})
    return classes


def record_workflow(prompt: dict) -> dict:
    """The workflow node by node with ComfyUI's classes (the SigLIP and ByT5 at the tiny sizes), CreateVideo /
    SaveVideo left out. Returns VAEDecode's frames."""
    import folder_paths

    for folder in ("diffusion_models", "vae", "text_encoders"):
        folder_paths.add_model_folder_path(folder, f"{MODELS}/{folder}", is_default=True)
    folder_paths.set_input_directory(INPUTS)
    classes = workflow_classes()
    results: dict[str, tuple] = {}

    def run(node_id: str) -> tuple:
        if node_id not in results:
            node = prompt[node_id]
            kind = node["class_type"]
            inputs = {k: run(v[0])[v[1]] if isinstance(v, list) else v for k, v in node["inputs"].items()}
            if kind == "CLIPVisionLoader":
                results[node_id] = load_tiny_siglip(inputs["clip_name"])
            else:
                results[node_id] = run_node(classes[kind], inputs)
        return results[node_id]

    (decode,) = [k for k, v in prompt.items() if v["class_type"] == "VAEDecode"]
    frames = run(decode)[0]
    sampler = prompt[decode]["inputs"]["samples"][0]
    return {
        "prompt": prompt,
        "latent_shape": list(run(sampler)[0]["samples"].shape),
        "frames": png_rgb(frames, MAX_RECORDED_VALUES),
    }


def main() -> None:
    torch.set_num_threads(1)
    paths = {name: f"{MODELS}/{rel}" for name, rel in FILES.items()}
    dit_sd = comfy.utils.load_torch_file(paths["transformer"])
    tiny_vision_width(dit_sd)
    tiny_byt5(comfy.utils.load_torch_file(paths["byt5"]), dit_sd)
    patcher = comfy.sd.load_diffusion_model_state_dict(dit_sd, model_options={"dtype": torch.float32})
    vae_sd = comfy.utils.load_torch_file(paths["vae"])
    tiny_vae_widths(vae_sd)
    vae = comfy.sd.VAE(sd=vae_sd)
    tiny_text_sizes(comfy.utils.load_torch_file(paths["text_encoder"]))
    clip = comfy.sd.load_clip(
        ckpt_paths=[paths["text_encoder"], paths["byt5"]], clip_type=comfy.sd.CLIPType.HUNYUAN_VIDEO_15
    )
    model = patcher.model
    record = {
        "comfyui": COMMIT,
        "files": {name: sha256(path) for name, path in paths.items()},
        "detected": {
            "model_class": type(model).__name__,
            "config_class": type(model.model_config).__name__,
            "unet_config": {
                k: v for k, v in model.model_config.unet_config.items() if isinstance(v, (int, float, str, bool, list))
            },
            "latent_format": type(model.latent_format).__name__,
            "vae_latent_channels": vae.latent_channels,
        },
        "transformer": record_transformer(patcher),
        "denoised": record_denoised(patcher),
        "vae": record_vae(vae),
        "nodes": record_nodes(vae),
        "text": record_text(clip),
        "latent_upscale": record_latent_upscale(),
        # the interfaces (GET_NODE_INFO_V1) of the two nodes offered, newer than 0.3.64's recorded /object_info
        "object_info": {
            cls.GET_NODE_INFO_V1()["name"]: {**cls.GET_NODE_INFO_V1(), "python_module": "comfy_extras.nodes_hunyuan"}
            for cls in (
                nodes_hunyuan.EmptyHunyuanVideo15Latent,
                nodes_hunyuan.HunyuanVideo15ImageToVideo,
                nodes_hunyuan.HunyuanVideo15SuperResolution,
                nodes_hunyuan.HunyuanVideo15LatentUpscaleWithModel,
            )
        },
        "workflow": record_workflow(json.loads(open(WORKFLOW).read())),
        "workflow_t2v": record_workflow(json.loads(open(WORKFLOW_T2V).read())),
    }
    print("wrote", write_json(OUT, record))


if __name__ == "__main__":
    main()
