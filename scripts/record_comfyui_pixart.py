"""Record what ComfyUI 0.3.64 (commit a125cd84) computes for PixArt-α and PixArt-Σ on the tiny demo files, as the
fixture tests/models/fixtures/comfyui_pixart.json.xz.

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<shim>:/work/main/scripts:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_pixart.py <fixture> <workspace> \\
        /work/main/workflows_json/pixart_sigma_text_to_image.json

ComfyUI fixes the released sizes (PixArt's 1152 width, 16 heads and 4096-wide T5 states; T5-XXL's config; the SD
VAE's widths and GroupNorm groups); this script gives its classes the tiny sizes read from the files (width, heads of
72 as 1152/16, caption width; the tiny T5's config and its own vocabulary, as scripts/record_comfyui_chroma.py does;
the file's width to the renaming of diffusers-layout files, which joins q/k/v at 1152; sd1-tiny-vae's widths, resnets
per level and 8 groups) and changes nothing else (but --fp32-text-enc): model_detection's PixArt rule, PixArtMS,
model_base.PixArt's size conditions, the PixArt T5 tokenizer and encoder, CLIPTextEncodePixArtAlpha, the samplers and
the VAE are ComfyUI's. Recorded: each DiT's raw output on seeded inputs (with and without sizes for α; α also from a
diffusers-layout file, which ComfyUI renames with its own pixart_to_diffusers map; Σ with LoRAs in diffusers' and
kohya's names, alone and chained, through comfy.sd.load_lora_for_models); a text-to-image workflow per
model run node by node with 0.3.64's node classes (UNETLoader, CLIPLoader type pixart, CLIPTextEncodePixArtAlpha,
CLIPTextEncode, KSampler): its sampled LATENT; and the shipped PixArt-Σ workflow through VAEDecode, SaveImage
replaced by what it would write.
"""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import (
    MAX_RECORDED_VALUES,
    b64,
    comfyui_on_cpu,
    node_classes,
    run_node,
    run_prompt,
    sha256,
    tiny_t5_in_comfyui,
    write_json,
)

OUT, WORKSPACE, WORKFLOW = sys.argv[1:4]
comfyui_on_cpu(flags=("--fp32-text-enc",))
import comfy.cli_args

comfy.cli_args.args.fp32_text_enc = True  # ours computes the tiny T5 in its file's float32
import comfy.model_detection
import comfy.sd
import comfy.sd1_clip
import comfy.text_encoders.pixart_t5
import comfy.utils
import folder_paths

COMMIT = "a125cd84"
MODELS = {
    "alpha": "diffusion_models/PixArt-XL-2-1024-MS_tiny.safetensors",
    "sigma": "diffusion_models/PixArt-Sigma-XL-2-1024-MS_tiny.safetensors",
}
TEXT_ENCODER = "text_encoders/flux-tiny-t5.safetensors"
VAE = "vae/sd1-tiny-vae.safetensors"
LORAS = {
    "diffusers": "loras/pixart-sigma-tiny-lora-diffusers.safetensors",
    "kohya": "loras/pixart-sigma-tiny-lora-kohya.safetensors",
}
LORA_STRENGTH = 0.8
VAE_GROUPS = 8
# PixArt-α in diffusers' layout (nodes/models/pixart_demo.write_diffusers_pixart writes it; not a demo-models file)
DIFFUSERS = "diffusion_models/PixArt-XL-2-1024-MS_diffusers_tiny.safetensors"
HEAD_WIDTH = 72  # ComfyUI's 16 heads at 1152
SIZE = (384, 320)  # width, height of the images (a 48x40 latent: ComfyUI's positions need a mean side over 32)
VOCAB = "/work/main/nodes/models/configs/flux-tiny/t5_vocab.json"


def tiny_sizes() -> None:
    tiny_t5_in_comfyui(f"{WORKSPACE}/models/{TEXT_ENCODER}", VOCAB, comfy.text_encoders.pixart_t5)
    detect = comfy.model_detection.detect_unet_config

    def detect_tiny(state_dict, key_prefix, metadata=None):
        cfg = detect(state_dict, key_prefix, metadata=metadata)
        if cfg is not None and str(cfg.get("image_model", "")).startswith("pixart"):
            width = state_dict[f"{key_prefix}x_embedder.proj.weight"].shape[0]
            cfg["hidden_size"] = width
            cfg["num_heads"] = width // HEAD_WIDTH
            cfg["caption_channels"] = state_dict[f"{key_prefix}y_embedder.y_proj.fc1.weight"].shape[1]
        return cfg

    comfy.model_detection.detect_unet_config = detect_tiny


def tiny_vae() -> None:
    """ComfyUI builds SD VAEs 128 wide with 2 resnets per level and 32 GroupNorm groups; sd1-tiny-vae is 8 wide at
    its first level, one resnet per level, 8 groups (group counts are not in the weights: its builder's choice)."""
    import comfy.ldm.modules.diffusionmodules.model as ldm_vae

    ae = comfy.utils.load_torch_file(f"{WORKSPACE}/models/{VAE}")
    sizes = {
        "ch": ae["encoder.conv_in.weight"].shape[0],
        "ch_mult": [1, 2, 4, 4],
        "num_res_blocks": len({k.split(".")[4] for k in ae if k.startswith("encoder.down.0.block.")}),
    }
    for name in ("Encoder", "Decoder"):
        cls = getattr(ldm_vae, name)
        setattr(ldm_vae, name, lambda cls=cls, **kw: cls(**{**kw, **sizes}))
    ops = ldm_vae.ops

    class TinyGroups:  # Normalize's GroupNorm with the tiny VAE's 8 groups; every other op as ComfyUI's
        def __getattr__(self, name):
            return getattr(ops, name)

        @staticmethod
        def GroupNorm(num_groups, num_channels, **kwargs):
            return ops.GroupNorm(num_groups=VAE_GROUPS, num_channels=num_channels, **kwargs)

    ldm_vae.ops = TinyGroups()


def run_to_latent(prompt: dict, classes: dict) -> dict:
    """The workflow's nodes in their numbered (dependency) order with 0.3.64's classes; the KSampler's LATENT."""
    results: dict[str, tuple] = {}
    for node_id in sorted(prompt, key=int):
        node = prompt[node_id]
        given = {k: results[v[0]][v[1]] if isinstance(v, list) else v for k, v in node["inputs"].items()}
        results[node_id] = run_node(classes[node["class_type"]], given)
    return results[max(prompt, key=int)][0]


def workflow(model: str) -> dict:
    """Text to image on a tiny PixArt: the positive prompt through CLIPTextEncodePixArtAlpha (a size other than the
    image's, so α's micro-conditions show), the negative through CLIPTextEncode."""
    width, height = SIZE
    positive = {
        "class_type": "CLIPTextEncodePixArtAlpha",
        "inputs": {"width": 1024, "height": 768, "text": "a red fox in snow", "clip": ["2", 0]},
    }
    return {
        "1": {"class_type": "UNETLoader", "inputs": {"unet_name": model.split("/", 1)[1], "weight_dtype": "default"}},
        "2": {"class_type": "CLIPLoader", "inputs": {"clip_name": TEXT_ENCODER.split("/", 1)[1], "type": "pixart"}},
        "3": positive,
        "4": {"class_type": "CLIPTextEncode", "inputs": {"text": "blurry", "clip": ["2", 0]}},
        "5": {"class_type": "EmptyLatentImage", "inputs": {"width": width, "height": height, "batch_size": 1}},
        "6": {
            "class_type": "KSampler",
            "inputs": {
                "model": ["1", 0],
                "seed": 7,
                "steps": 3,
                "cfg": 4.5,
                "sampler_name": "euler",
                "scheduler": "normal",
                "positive": ["3", 0],
                "negative": ["4", 0],
                "latent_image": ["5", 0],
                "denoise": 0.6,
            },
        },
    }


def inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, context) drawn from one generator in this order (the test draws them alike): batch 2, a 48x40 latent,
    7 text rows of the tiny T5's width."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, 4, 48, 40, generator=g), torch.randn(2, 7, 32, generator=g)


def main() -> None:
    torch.set_num_threads(1)
    tiny_sizes()
    from comfy_extras import nodes_pixart

    out = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_pixart.py",
        "files": {p: sha256(f"{WORKSPACE}/models/{p}") for p in (*MODELS.values(), TEXT_ENCODER, VAE)},
        "forward": {},
        "workflows": {},
    }
    timesteps = torch.tensor([620.5, 140.0])
    for name, path in MODELS.items():
        net = comfy.sd.load_diffusion_model(f"{WORKSPACE}/models/{path}").model.diffusion_model
        x, context = inputs(11)
        with torch.no_grad():
            out["forward"][name] = {"timesteps": timesteps.tolist(), "out": b64(net(x, timesteps, context))}
            if name == "alpha":
                size = torch.tensor([[768.0, 1024.0], [512.0, 512.0]])
                ar = torch.tensor([[0.75], [1.0]])
                out["forward"]["alpha_sized"] = {
                    "timesteps": timesteps.tolist(),
                    "c_size": size.tolist(),
                    "c_ar": ar.tolist(),
                    "out": b64(net(x, timesteps, context, c_size=size, c_ar=ar)),
                }
    out["diffusers_file"] = {"path": DIFFUSERS, "sha256": sha256(f"{WORKSPACE}/models/{DIFFUSERS}")}
    # ComfyUI's diffusers renaming joins q/k/v at the released width (1152) unless told the file's
    to_comfy = comfy.utils.pixart_to_diffusers
    width = comfy.utils.load_torch_file(f"{WORKSPACE}/models/{DIFFUSERS}")["pos_embed.proj.weight"].shape[0]
    comfy.utils.pixart_to_diffusers = lambda cfg, output_prefix="": to_comfy(
        {**cfg, "hidden_size": width}, output_prefix
    )
    net = comfy.sd.load_diffusion_model(f"{WORKSPACE}/models/{DIFFUSERS}").model.diffusion_model
    x, context = inputs(11)
    with torch.no_grad():
        out["forward"]["diffusers_alpha"] = {"timesteps": timesteps.tolist(), "out": b64(net(x, timesteps, context))}
    # LoRAs on Σ (pixart_demo.write_tiny_pixart_loras), each alone and the two chained, strength 0.8
    out["loras"] = {kind: {"path": p, "sha256": sha256(f"{WORKSPACE}/models/{p}")} for kind, p in LORAS.items()}
    for case, kinds in (("diffusers", ["diffusers"]), ("kohya", ["kohya"]), ("both", ["diffusers", "kohya"])):
        patcher = comfy.sd.load_diffusion_model(f"{WORKSPACE}/models/{MODELS['sigma']}")
        for kind in kinds:
            lora = comfy.utils.load_torch_file(f"{WORKSPACE}/models/{LORAS[kind]}")
            patcher, _ = comfy.sd.load_lora_for_models(patcher, None, lora, LORA_STRENGTH, 0)
        patcher.patch_model()
        x, context = inputs(11)
        with torch.no_grad():
            result = patcher.model.diffusion_model(x, timesteps, context)
        out["forward"][f"sigma_lora_{case}"] = {"timesteps": timesteps.tolist(), "loras": kinds, "out": b64(result)}
    for folder in ("diffusion_models", "text_encoders"):
        folder_paths.add_model_folder_path(folder, f"{WORKSPACE}/models/{folder}", is_default=True)
    classes = node_classes(nodes_pixart)
    for name, path in MODELS.items():
        prompt = workflow(path)
        out["workflows"][name] = {"prompt": prompt, "latent": b64(run_to_latent(prompt, classes)["samples"])}
    tiny_vae()
    folder_paths.add_model_folder_path("vae", f"{WORKSPACE}/models/vae", is_default=True)
    with open(WORKFLOW) as f:
        out["image_workflow"] = run_prompt(json.load(f), classes, max_values=MAX_RECORDED_VALUES)
    write_json(OUT, out)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
