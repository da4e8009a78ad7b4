"""Record what ComfyUI 0.3.64 (a125cd84) computes with hunyuan-image-2.1-tiny, as the fixture our Hunyuan Image 2.1
support is tested on (tests/models/fixtures/comfyui_hunyuan_image.json.xz).

Run inside ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here), after
`comfy-cluster demo-models` (or nodes.models.hunyuan_image_demo.build_demo_hunyuan_image) wrote the tiny files:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<shim>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_hunyuan_image.py tests/models/fixtures/comfyui_hunyuan_image.json <models> \\
        workflows_json/hunyuan_image_2_1_t2i.json

ComfyUI 0.3.64 reads the transformer's widths from the file (its heads are 128 wide) but fixes the 32x VAE's
(128..1024, two resnets per stage): so that its own classes load the tiny VAE, this script gives its Encoder and
Decoder the tiny file's stage widths and resnet count, and changes nothing else (comfy/sd.py's VAE: pixels 2x-1,
the posterior's mode, (x+1)/2 clamped; model detection, model_base.HunyuanImage21, its FLOW sampling at shift 5
and latent format are ComfyUI's).

Its Qwen2.5-VL config is given the tiny text encoder's sizes (and told by its width), as
scripts/record_comfyui_qwen_image.py does, its ByT5 glyph encoder the tiny file's config and the DiT's ByT5 mapper the
tiny file's widths; CLIPLoader / DualCLIPLoader type hunyuan_image's tokenizers, template, layer -3, template cut and
quoted-text rule are ComfyUI's.

Recorded: the text encoder's tokens and conditioning (with CLIPSetLastLayer -2 too), alone and with the ByT5 glyph
encoder (its states of the quoted text); the transformer's raw output with ByT5 states; the transformer's raw output on seeded inputs (two latent sizes, a batch of two timesteps); the whole
model's denoised prediction with the latent format and model sampling; the VAE's decode and encode; and the
HunyuanRefinerLatent node's outputs; the distilled DiT's raw output with guidance and the sampler's schedule; the
shipped workflow on the distilled DiT; and the shipped workflow (workflows_json/hunyuan_image_2_1_t2i.json, the
third argument) run node by node with ComfyUI's node classes: the image as SaveImage would write it. Inputs are seeded draws the test makes again (their sums are stored);
outputs above MAX_RECORDED_VALUES are kept as strided grids.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import torch
from comfyui_recording import MAX_RECORDED_VALUES, b64, comfyui_on_cpu, node_classes, run_prompt, sha256, write_json

OUT, MODELS, WORKFLOW = sys.argv[1:4]
comfyui_on_cpu()
import comfy.ldm.hunyuan_video.model  # noqa: E402
import comfy.ldm.hunyuan_video.vae  # noqa: E402
import comfy.sd  # noqa: E402
import comfy.sd1_clip  # noqa: E402
import comfy.text_encoders.hunyuan_image  # noqa: E402
import comfy.text_encoders.llama  # noqa: E402
import comfy.text_encoders.t5  # noqa: E402
import comfy.utils  # noqa: E402
import comfy_extras.nodes_hunyuan as nodes_hunyuan  # noqa: E402
import folder_paths  # noqa: E402

COMMIT = "a125cd84b054a57729b5eecab930ca9408719832"
FILES = {
    "transformer": "diffusion_models/hunyuanimage2.1_tiny.safetensors",
    "vae": "vae/hunyuan_image_2.1_vae_tiny.safetensors",
    "text_encoder": "text_encoders/qwen_2.5_vl_7b_hunyuan_image_tiny.safetensors",
    "distilled": "diffusion_models/hunyuanimage2.1_distilled_tiny.safetensors",
    "byt5": "text_encoders/byt5_small_glyphxl_tiny.safetensors",
}
TEXT_WIDTH = 32  # the tiny Qwen2.5-VL's (nodes.models.qwen_image_demo)
HEAD = 128  # ComfyUI's Qwen2.5-VL head width
PROMPTS = {
    "plain": "a red cube on a wooden table",
    "quoted": 'a sign that says "OPEN" and \u201cbienvenue\u201d',
    "weights_syntax": "a (red:1.3) cube, \\(escaped\\)",
    "refiner_chat": "<|start_header_id|>system<|end_header_id|>\n\nMake the image high quality, with sharp detail "
    "and natural colour, keeping the composition as it is.<|eot_id|>a red cube",
    "empty": "",
}


def tiny_text_sizes(te: dict) -> None:
    """Give ComfyUI's Qwen2.5-VL-7B config the tiny file's sizes and tell it by the tiny width (as
    scripts/record_comfyui_qwen_image.py does)."""
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
    sizes: 8-wide heads) and the DiT's ByT5 mapper the file's widths (ComfyUI fixes 1472 -> 2048)."""
    width = byt5["shared.weight"].shape[1]
    config = {
        "d_ff": byt5["encoder.block.0.layer.1.DenseReluDense.wo.weight"].shape[1],
        "d_kv": 8,
        "d_model": width,
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
            out[name if layer is None else f"{name}_layer_{layer}"] = {
                "prompt": text,
                "layer": layer,
                "ids": [t for t, *_ in tokens["qwen25_7b"][0]],
                "byt5_ids": [t for t, *_ in tokens["byt5"][0]] if "byt5" in tokens else None,
                "cond": b64(result["cond"]),
                "byt5": b64(result["conditioning_byt5small"]) if "conditioning_byt5small" in result else None,
                "extra_keys": sorted(k for k in result if k not in ("cond", "pooled_output")),
            }
    return out


def tiny_vae_widths(vae_sd: dict) -> None:
    """Give ComfyUI's 32x VAE classes the tiny file's stage widths and resnets per stage."""
    stages = sorted({int(k.split(".")[2]) for k in vae_sd if k.startswith("encoder.down.")})
    widths = [vae_sd[f"encoder.down.{i}.block.0.conv1.weight"].shape[0] for i in stages]
    blocks = len({k.split(".")[4] for k in vae_sd if k.startswith("encoder.down.0.block.")})
    module = comfy.ldm.hunyuan_video.vae
    for name in ("Encoder", "Decoder"):
        cls = getattr(module, name)
        setattr(
            module,
            name,
            lambda cls=cls, **cfg: cls(**{**cfg, "block_out_channels": widths, "num_res_blocks": blocks}),
        )


def draws(seed: int, *shapes: list[int]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g) for s in shapes]


def record_transformer(patcher) -> list[dict]:
    net = patcher.model.diffusion_model
    cases = []
    for seed, shape, tokens, t in (
        (1, [1, 64, 3, 4], 7, [700.0]),
        (2, [2, 64, 2, 5], 5, [300.0, 900.0]),
    ):
        x, context = draws(seed, shape, [shape[0], tokens, TEXT_WIDTH])
        with torch.no_grad():
            out = net(x, torch.tensor(t), context)
        cases.append(
            {
                "seed": seed,
                "shape": shape,
                "tokens": tokens,
                "timesteps": t,
                "input_sum": float(x.sum() + context.sum()),
                "out": b64(out, MAX_RECORDED_VALUES),
            }
        )
    return cases


def record_transformer_byt5(patcher) -> dict:
    """The raw output with ByT5 states beside the text (ComfyUI's txt_byt5, mapped and joined to the text stream)."""
    net = patcher.model.diffusion_model
    width = net.byt5_in.fc1.weight.shape[1]
    x, context, byt5 = draws(10, [1, 64, 3, 4], [1, 6, TEXT_WIDTH], [1, 9, width])
    with torch.no_grad():
        out = net(x, torch.tensor([600.0]), context, txt_byt5=byt5)
    return {
        "seed": 10,
        "shape": [1, 64, 3, 4],
        "tokens": 6,
        "byt5_tokens": 9,
        "byt5_width": width,
        "timestep": 600.0,
        "input_sum": float(x.sum() + context.sum() + byt5.sum()),
        "out": b64(out, MAX_RECORDED_VALUES),
    }


def record_distilled(patcher) -> list[dict]:
    """The distilled DiT's raw output with guidance and the sampler's schedule as ComfyUI's sampling loop passes
    them (transformer_options sigmas / sample_sigmas): a step on the schedule, and one off it (no second time)."""
    net = patcher.model.diffusion_model
    schedule = torch.tensor([1.0, 0.7, 0.4, 0.0])
    cases = []
    for seed, shape, tokens, sigma, guidance in ((8, [1, 64, 3, 4], 6, 0.7, 6.0), (9, [2, 64, 2, 3], 5, 0.55, 3.5)):
        x, context = draws(seed, shape, [shape[0], tokens, TEXT_WIDTH])
        options = {"sigmas": torch.tensor([sigma]), "sample_sigmas": schedule}
        with torch.no_grad():
            out = net(
                x,
                torch.full((shape[0],), sigma * 1000.0),
                context,
                guidance=torch.tensor([guidance]),
                transformer_options=options,
            )
        cases.append(
            {
                "seed": seed,
                "shape": shape,
                "tokens": tokens,
                "sigma": sigma,
                "guidance": guidance,
                "schedule": schedule.tolist(),
                "input_sum": float(x.sum() + context.sum()),
                "out": b64(out, MAX_RECORDED_VALUES),
            }
        )
    return cases


def record_denoised(patcher) -> dict:
    model = patcher.model
    x, context = draws(3, [1, 64, 3, 3], [1, 6, TEXT_WIDTH])
    with torch.no_grad():
        denoised = model.apply_model(x, torch.tensor([0.6]), c_crossattn=context)
    ms = patcher.get_model_object("model_sampling")
    sigmas = torch.tensor([1.0, 0.75, 0.5, 0.1, 0.01])
    return {
        "seed": 3,
        "shape": [1, 64, 3, 3],
        "tokens": 6,
        "sigma": 0.6,
        "input_sum": float(x.sum() + context.sum()),
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
    latent = torch.randn([1, 64, 2, 3], generator=g)
    pixels = torch.rand([1, 70, 100, 3], generator=g)  # not multiples of 32: ComfyUI centre-crops
    return {
        "seed": 5,
        "latent_shape": [1, 64, 2, 3],
        "pixels_shape": [1, 70, 100, 3],
        "input_sum": float(latent.sum() + pixels.sum()),
        "decoded": b64(vae.decode(latent), MAX_RECORDED_VALUES),
        "encoded": b64(vae.encode(pixels)),
    }


def record_refiner_latent() -> list[dict]:
    cases = []
    for seed, shape, augmentation in ((6, [1, 64, 3, 4], 0.1), (7, [2, 32, 1, 3, 2], 0.35)):
        latent, cond = draws(seed, shape, [1, 4, 8])
        pos, neg, out = nodes_hunyuan.HunyuanRefinerLatent().execute(
            [[cond, {"pooled_output": None}]], [[cond * 2, {}]], {"samples": latent}, augmentation
        )
        cases.append(
            {
                "seed": seed,
                "shape": shape,
                "noise_augmentation": augmentation,
                "positive_keys": sorted(pos[0][1]),
                "negative_keys": sorted(neg[0][1]),
                "concat_is_latent": bool(torch.equal(pos[0][1]["concat_latent_image"], latent)),
                "augmentation_out": [pos[0][1]["noise_augmentation"], neg[0][1]["noise_augmentation"]],
                "latent_out_shape": list(out["samples"].shape),
                "latent_out_abs_sum": float(out["samples"].abs().sum()),
            }
        )
    return cases


def distilled_variant(prompt: dict) -> dict:
    """The shipped workflow on the distilled DiT (tests/e2e/test_hunyuan_image_workflow.py makes the same)."""
    (loader,) = [n for n in prompt.values() if n["class_type"] == "UNETLoader"]
    loader["inputs"]["unet_name"] = FILES["distilled"].split("/")[-1]
    return prompt


def main() -> None:
    torch.set_num_threads(2)
    paths = {name: f"{MODELS}/{rel}" for name, rel in FILES.items()}
    tiny_vae_widths(comfy.utils.load_torch_file(paths["vae"]))
    tiny_text_sizes(comfy.utils.load_torch_file(paths["text_encoder"]))
    tiny_byt5(comfy.utils.load_torch_file(paths["byt5"]), comfy.utils.load_torch_file(paths["transformer"]))
    for folder in ("diffusion_models", "text_encoders", "vae"):
        folder_paths.add_model_folder_path(folder, f"{MODELS}/{folder}", is_default=True)
    clip = comfy.sd.load_clip(ckpt_paths=[paths["text_encoder"]], clip_type=comfy.sd.CLIPType.HUNYUAN_IMAGE)
    dual = comfy.sd.load_clip(
        ckpt_paths=[paths["text_encoder"], paths["byt5"]], clip_type=comfy.sd.CLIPType.HUNYUAN_IMAGE
    )
    patcher = comfy.sd.load_diffusion_model(paths["transformer"])
    vae = comfy.sd.VAE(sd=comfy.utils.load_torch_file(paths["vae"]))
    record = {
        "comfyui_commit": COMMIT,
        "files": {name: {"path": FILES[name], "sha256": sha256(p)} for name, p in paths.items()},
        "model_class": type(patcher.model).__name__,
        "unet_config": {
            k: v
            for k, v in patcher.model.model_config.unet_config.items()
            if isinstance(v, (bool, int, float, str, list))
        },
        "transformer": record_transformer(patcher),
        "denoised": record_denoised(patcher),
        "vae": record_vae(vae),
        "refiner_latent": record_refiner_latent(),
        "text": record_text(clip),
        "text_with_byt5": record_text(dual),
        "transformer_with_byt5": record_transformer_byt5(patcher),
        "workflow": run_prompt(
            json.loads(open(WORKFLOW).read()), node_classes(nodes_hunyuan), max_values=MAX_RECORDED_VALUES
        ),
        "distilled": record_distilled(comfy.sd.load_diffusion_model(paths["distilled"])),
        "distilled_workflow": run_prompt(
            distilled_variant(json.loads(open(WORKFLOW).read())),
            node_classes(nodes_hunyuan),
            max_values=MAX_RECORDED_VALUES,
        ),
    }
    print(write_json(OUT, record))


if __name__ == "__main__":
    main()
