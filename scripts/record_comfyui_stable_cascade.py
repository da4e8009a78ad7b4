"""Record what ComfyUI 0.3.64 (commit a125cd84) computes for Stable Cascade on the tiny demo files, as the fixture
tests/models/fixtures/comfyui_stable_cascade.json.

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<shim>:.:/work/main/scripts OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_stable_cascade.py <fixture> <workspace> /work/main/workflows_json/stable_cascade.json

ComfyUI 0.3.64 fixes the released sizes (stage C's 2048 or 1536 widths, stage B's four levels, stage A's 384-wide
VQGAN, the stage C coder's EfficientNetV2-S and 512-wide previewer, CLIP-G's clip_config_bigg.json); this script gives its classes the tiny sizes read from the files' shapes and
changes nothing else: model detection's stage and prefixes, the checkpoint's CLIP-G (its tokenizer, attention mask,
layer and pooled output), StageC / StageB / StageA, model_base's conditioning, the cosine schedule, the samplers
and the nodes are ComfyUI's. Recorded: the conditioning of two prompts; the stage C and stage B networks' raw outputs
on seeded inputs (comfy's apply_model: its timestep, input scaling and extra conditions), stage C's also with two
unCLIP image embeds, given directly and through unCLIPConditioning and a KSampler; stage A's decoding of a
seeded latent; StableCascade_SuperResolutionControlnet on a seeded image with stage A; StableCascade_StageC_VAEEncode
with the stage C coder (ComfyUI's EfficientNet is torchvision's, given the file's tiny stage widths) and the
previewer's decoding of a seeded latent; and the shipped workflow run node by node with 0.3.64's node classes, SaveImage replaced by what it
would write.
"""

from __future__ import annotations

import json
import sys
from functools import partial
from types import SimpleNamespace

import torch
from comfyui_recording import MAX_RECORDED_VALUES, b64, comfyui_on_cpu, node_classes, run_node, run_prompt, sha256

OUT, WORKSPACE, WORKFLOW = sys.argv[1:4]
comfyui_on_cpu()
import comfy.ldm.cascade.stage_a as stage_a_mod  # noqa: E402
import comfy.ldm.cascade.stage_c_coder as coder_mod  # noqa: E402
import comfy.model_detection  # noqa: E402
import comfy.sd  # noqa: E402
import comfy.sd1_clip  # noqa: E402
import comfy.utils  # noqa: E402
import folder_paths  # noqa: E402
from torchvision.models import efficientnet  # noqa: E402

COMMIT = "a125cd84"
FILES = {
    "stage_c": "checkpoints/stable_cascade_stage_c-tiny.safetensors",
    "stage_b": "checkpoints/stable_cascade_stage_b-tiny.safetensors",
    "stage_c_unet": "diffusion_models/stable_cascade_stage_c-tiny.safetensors",
}
PROMPTS = ["evening sunset scenery blue sky nature, glass bottle with a galaxy in it", "", "a (red:1.3) cat"]
# (seed, latent shape, sigma(s))
STAGE_C_CASES = {"one": (1, [1, 16, 3, 4], [1.5]), "batch_two": (2, [2, 16, 4, 3], [2.0, 0.4])}
STAGE_B_CASES = {"one": (3, [1, 4, 24, 32], [1.0]), "batch_two": (4, [2, 4, 16, 12], [1.5, 0.2])}


def _count(sd: dict, prefix: str) -> int:
    return len({k[len(prefix) :].split(".")[0] for k in sd if k.startswith(prefix)})


def cascade_sizes(sd: dict, p: str) -> dict:
    """StageC / StageB sizes from the tensors (ComfyUI's own attention names, or Stability's fused ones)."""
    levels = _count(sd, f"{p}down_blocks.")
    widths = [sd[f"{p}down_blocks.{i}.0.depthwise.weight"].shape[0] for i in range(levels)]

    def kinds(prefix):
        out = ""
        for j in range(_count(sd, prefix)):
            q = f"{prefix}{j}."
            out += "C" if q + "depthwise.weight" in sd else "T" if q + "mapper.weight" in sd else "A"
        return out

    configs, down, up = [], [], []
    for i in range(levels):
        k = kinds(f"{p}down_blocks.{i}.")
        cfg = k[: k.index("C", 1)] if "C" in k[1:] else k
        configs.append(cfg)
        down.append(len(k) // len(cfg))
    for j in range(levels):
        up.append(_count(sd, f"{p}up_blocks.{j}.") // len(configs[levels - 1 - j]))
    stage_c = f"{p}clip_txt_mapper.weight" in sd
    c_in = 16 if stage_c else 4
    out = {
        "c_hidden": widths,
        "nhead": [w // 64 if "A" in c else -1 for w, c in zip(widths, configs)],
        "blocks": [down, up],
        "block_repeat": [
            [_count(sd, f"{p}down_repeat_mappers.{i}.") + 1 for i in range(levels)],
            [_count(sd, f"{p}up_repeat_mappers.{j}.") + 1 for j in range(levels)],
        ],
        "level_config": configs,
        "patch_size": int(round((sd[f"{p}embedding.1.weight"].shape[1] // c_in) ** 0.5)),
    }
    if stage_c:
        out["c_cond"] = sd[f"{p}clip_txt_mapper.weight"].shape[0]
        out["c_clip_text"] = sd[f"{p}clip_txt_mapper.weight"].shape[1]
        out["c_clip_text_pooled"] = sd[f"{p}clip_txt_pooled_mapper.weight"].shape[1]
        out["c_clip_img"] = sd[f"{p}clip_img_mapper.weight"].shape[1]
    else:
        out["c_cond"] = sd[f"{p}clip_mapper.weight"].shape[0] // 4
        out["c_clip"] = sd[f"{p}clip_mapper.weight"].shape[1]
    return out


def tiny_sizes() -> None:
    detect = comfy.model_detection.detect_unet_config

    def detect_tiny(state_dict, key_prefix, metadata=None):
        cfg = detect(state_dict, key_prefix, metadata=metadata)
        if cfg is not None and "stable_cascade_stage" in cfg:
            cfg.update(cascade_sizes(state_dict, key_prefix))
        return cfg

    comfy.model_detection.detect_unet_config = detect_tiny
    ckpt_c = comfy.utils.load_torch_file(f"{WORKSPACE}/models/{FILES['stage_c']}")
    te = "text_encoder.clip_g.transformer.text_model."
    clip_sizes = {
        "vocab_size": ckpt_c[te + "embeddings.token_embedding.weight"].shape[0],
        "hidden_size": ckpt_c[te + "embeddings.token_embedding.weight"].shape[1],
        "intermediate_size": ckpt_c[te + "encoder.layers.0.mlp.fc1.weight"].shape[0],
        "num_hidden_layers": _count(ckpt_c, te + "encoder.layers."),
        # heads are not in the weights: the project's tiny CLIPs use 8-wide heads (nodes/models/clip.py clip_heads)
        "num_attention_heads": ckpt_c[te + "embeddings.token_embedding.weight"].shape[1] // 8,
        "projection_dim": ckpt_c["text_encoder.clip_g.transformer.text_projection.weight"].shape[0],
    }
    sd_clip_init = comfy.sd1_clip.SDClipModel.__init__

    def tiny_clip_init(self, *args, textmodel_json_config=None, **kw):
        if isinstance(textmodel_json_config, str) and textmodel_json_config.endswith("clip_config_bigg.json"):
            with open(textmodel_json_config) as f:
                textmodel_json_config = {**json.load(f), **clip_sizes}
        sd_clip_init(self, *args, textmodel_json_config=textmodel_json_config, **kw)

    comfy.sd1_clip.SDClipModel.__init__ = tiny_clip_init
    vae = {
        k[4:]: v
        for k, v in comfy.utils.load_torch_file(f"{WORKSPACE}/models/{FILES['stage_b']}").items()
        if k.startswith("vae.")
    }
    a_sizes = {
        "levels": 2,
        "bottleneck_blocks": _count(vae, "up_blocks.") - 3,
        "c_hidden": vae["down_blocks.1.weight"].shape[0],
        "c_latent": vae["vquantizer.codebook.weight"].shape[1],
        "codebook_size": vae["vquantizer.codebook.weight"].shape[0],
    }
    comfy.sd.StageA = lambda: stage_a_mod.StageA(**a_sizes)
    coder = {k[4:]: v for k, v in ckpt_c.items() if k.startswith("vae.")}
    effnet = tiny_effnet_settings({k[len("encoder.") :]: v for k, v in coder.items() if k.startswith("encoder.")})
    coder_mod.torchvision.models.efficientnet_v2_s = lambda: efficientnet.EfficientNet(
        effnet["settings"], dropout=0.2, last_channel=effnet["head"], norm_layer=partial(torch.nn.BatchNorm2d, eps=1e-3)
    )
    previewer = coder_mod.Previewer
    hidden = coder["previewer.blocks.0.weight"].shape[0]
    coder_mod.Previewer = lambda: previewer(c_hidden=hidden)


def tiny_effnet_settings(sd: dict) -> dict:
    """torchvision's EfficientNet settings of the file's backbone: EfficientNetV2-S's strides, the rest from shapes."""
    settings = []
    for s, stride in zip(range(1, 7), (1, 2, 2, 2, 1, 2)):
        p = f"backbone.{s}.0.block."
        layers = _count(sd, p)
        fused = f"{p}2.fc1.weight" not in sd and f"{p}1.fc1.weight" not in sd
        first = sd[f"{p}0.0.weight"]
        cin, cout = first.shape[1], sd[f"{p}{layers - 1}.0.weight"].shape[0]
        if fused:
            expand, kernel = (first.shape[0] // cin if layers == 2 else 1), first.shape[-1]
            cfg = efficientnet.FusedMBConvConfig
        else:
            has_expand = f"{p}2.fc1.weight" in sd
            expand = first.shape[0] // cin if has_expand else 1
            kernel = sd[f"{p}{1 if has_expand else 0}.0.weight"].shape[-1]
            cfg = efficientnet.MBConvConfig
        settings.append(cfg(expand, kernel, stride, cin, cout, _count(sd, f"backbone.{s}.")))
    return {"settings": settings, "head": sd["backbone.7.0.weight"].shape[0]}


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def main() -> None:
    torch.set_num_threads(1)
    tiny_sizes()
    from comfy_extras import nodes_stable_cascade

    for folder in ("checkpoints", "diffusion_models", "vae", "text_encoders"):
        folder_paths.add_model_folder_path(folder, f"{WORKSPACE}/models/{folder}", is_default=True)
    out = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_stable_cascade.py",
        "files": {p: sha256(f"{WORKSPACE}/models/{p}") for p in FILES.values()},
        "text": [],
        "stage_c": {},
        "stage_b": {},
    }
    model_c, clip, vae_c, _ = comfy.sd.load_checkpoint_guess_config(f"{WORKSPACE}/models/{FILES['stage_c']}")
    model_b, _, vae_a, _ = comfy.sd.load_checkpoint_guess_config(f"{WORKSPACE}/models/{FILES['stage_b']}")
    conds = []
    for prompt in PROMPTS:
        ((cond, extra),) = clip.encode_from_tokens_scheduled(clip.tokenize(prompt))
        conds.append((cond, extra["pooled_output"]))
        out["text"].append({"prompt": prompt, "cond": b64(cond), "pooled": b64(extra["pooled_output"])})
    cond, pooled = conds[0]
    for name, (seed, shape, sigmas) in STAGE_C_CASES.items():
        x, sigma = seeded(seed, *shape), torch.tensor(sigmas)
        extra = model_c.model.extra_conds(pooled_output=pooled, cross_attn=cond, noise=x)
        kwargs = {k: v.process_cond(x.shape[0], area=None).cond for k, v in extra.items()}
        with torch.no_grad():
            y = model_c.model.apply_model(x, sigma, **kwargs)
        out["stage_c"][name] = {"seed": seed, "shape": shape, "sigmas": sigmas, "denoised": b64(y)}
    # unCLIPConditioning on stage C: two images' embeds with their strengths (ComfyUI's clip_img tokens)
    images = [(seeded(11, 1, 768), 0.7), (seeded(12, 1, 768), 1.3)]
    unclip = [{"strength": w, "clip_vision_output": SimpleNamespace(image_embeds=e)} for e, w in images]
    x = seeded(13, 1, 16, 3, 4)
    extra = model_c.model.extra_conds(pooled_output=pooled, cross_attn=cond, noise=x, unclip_conditioning=unclip)
    kwargs = {k: v.process_cond(1, area=None).cond for k, v in extra.items()}
    with torch.no_grad():
        y = model_c.model.apply_model(x, torch.tensor([1.2]), **kwargs)
    out["stage_c_unclip"] = {
        "seed": 13,
        "shape": [1, 16, 3, 4],
        "sigmas": [1.2],
        "images": [{"seed": 11 + i, "strength": w} for i, (_, w) in enumerate(images)],
        "denoised": b64(y),
    }
    # the same through the nodes: unCLIPConditioning on the positive prompt, KSampler on stage C
    classes = node_classes(nodes_stable_cascade)
    positive = [[cond, {"pooled_output": pooled}]]
    for e, w in images:
        (positive,) = run_node(
            classes["unCLIPConditioning"],
            {
                "conditioning": positive,
                "clip_vision_output": SimpleNamespace(image_embeds=e),
                "strength": w,
                "noise_augmentation": 0.0,
            },
        )
    negative = [[conds[1][0], {"pooled_output": conds[1][1]}]]
    (sampled,) = run_node(
        classes["KSampler"],
        {
            "model": model_c,
            "seed": 4,
            "steps": 2,
            "cfg": 3.0,
            "sampler_name": "euler",
            "scheduler": "simple",
            "positive": positive,
            "negative": negative,
            "latent_image": {"samples": torch.zeros(1, 16, 3, 4)},
            "denoise": 1.0,
        },
    )
    out["stage_c_unclip"]["ksampler"] = {"seed": 4, "steps": 2, "cfg": 3.0, "samples": b64(sampled["samples"])}
    for name, (seed, shape, sigmas) in STAGE_B_CASES.items():
        x, sigma = seeded(seed, *shape), torch.tensor(sigmas)
        prior = seeded(seed + 100, 1, 16, 3, 4)
        extra = model_b.model.extra_conds(pooled_output=pooled, noise=x, stable_cascade_prior=prior)
        kwargs = {k: v.process_cond(x.shape[0], area=None).cond for k, v in extra.items()}
        with torch.no_grad():
            y = model_b.model.apply_model(x, sigma, **kwargs)
        out["stage_b"][name] = {"seed": seed, "shape": shape, "sigmas": sigmas, "denoised": b64(y)}
    latent = seeded(5, 1, 4, 6, 8)
    out["stage_a"] = {"seed": 5, "shape": [1, 4, 6, 8], "image": b64(vae_a.decode(latent))}
    image = torch.rand(2, 42, 38, 3, generator=torch.Generator().manual_seed(6))
    cn, c, b = run_node(classes["StableCascade_SuperResolutionControlnet"], {"image": image, "vae": vae_a})
    out["super_resolution"] = {
        "seed": 6,
        "shape": [2, 42, 38, 3],
        "controlnet_input": b64(cn),
        "stage_c": list(c["samples"].shape),
        "stage_b": list(b["samples"].shape),
    }
    image = torch.rand(1, 100, 90, 3, generator=torch.Generator().manual_seed(7))
    c, b = run_node(classes["StableCascade_StageC_VAEEncode"], {"image": image, "vae": vae_c, "compression": 20})
    out["stage_c_encode"] = {
        "seed": 7,
        "shape": [1, 100, 90, 3],
        "compression": 20,
        "stage_c": b64(c["samples"]),
        "stage_b": list(b["samples"].shape),
    }
    out["previewer"] = {"seed": 8, "shape": [1, 16, 3, 4], "image": b64(vae_c.decode(seeded(8, 1, 16, 3, 4)))}
    prompt = json.load(open(WORKFLOW))
    out["workflow"] = run_prompt(prompt, classes, max_values=MAX_RECORDED_VALUES)
    with open(OUT, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
