"""Record what ComfyUI 0.3.64 (commit a125cd84) computes for Genmo Mochi 1 preview on the tiny files
(nodes/models/mochi_demo.py: diffusion_models/mochi_preview_tiny, vae/mochi_vae_tiny; flux-tiny-t5 as T5-XXL), as
tests/models/test_mochi.py and tests/e2e/test_mochi_workflow.py check them (tests/models/fixtures/comfyui_mochi.json.xz).

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`,
with -O (Genmo's block asserts the released feed-forward width, 12288, which the tiny file has not):

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<torchvision shim>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python -O /work/main/scripts/record_comfyui_mochi.py <fixture> <workspace>

ComfyUI fixes the released sizes of the DiT (model_detection's mochi_preview config) and of the VAE (VideoVAE());
this script gives both the tiny file's sizes and its T5 the tiny sizes and vocabulary (comfyui_recording's
tiny_t5_in_comfyui, --fp32-text-enc) and changes nothing else. Recorded: the detected model config; the workflow's
prompts encoded by CLIPLoader type mochi (tokens, conditioning, attention mask); the raw DiT output and apply_model's
prediction at sigma 0.7 for seeded inputs with a 7-token mask; VAE.decode of a seeded latent (as VAEDecode runs it
on a CPU: the whole latent at once) VAEDecodeTiled's decode of one in tiles of time, height and width; VAE.encode of seeded frames (VAEEncode's); apply_model with a LoRA (tiny_lora) at 0.8 and
on the DiT made scaled fp8 (tiny_scaled_fp8); and workflows_json/mochi_t2v.json run node by node with 0.3.64's node classes
(the sampled latent and VAEDecode's frames; CreateVideo / SaveVideo are not run)."""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import (
    MAX_RECORDED_VALUES,
    b64,
    comfyui_on_cpu,
    node_classes,
    png_rgb,
    run_node,
    run_prompt,
    sha256,
    tiny_t5_in_comfyui,
    write_json,
)

OUT, WORKSPACE = sys.argv[1:3]
comfyui_on_cpu(flags=("--fp32-text-enc",))
import comfy.cli_args  # noqa: E402

comfy.cli_args.args.fp32_text_enc = True
import comfy.ldm.genmo.vae.model as genmo_vae  # noqa: E402
import comfy.model_detection  # noqa: E402
import comfy.model_management  # noqa: E402
import comfy.sd  # noqa: E402
import comfy.text_encoders.genmo  # noqa: E402
import comfy.utils  # noqa: E402
import folder_paths  # noqa: E402

COMMIT = "a125cd84"
REPO = "/work/main"
DIT = "diffusion_models/mochi_preview_tiny.safetensors"
VAE = "vae/mochi_vae_tiny.safetensors"
TEXT_ENCODER = "text_encoders/flux-tiny-t5.safetensors"
VOCAB = f"{REPO}/nodes/models/configs/flux-tiny/t5_vocab.json"
FORWARD = {"x": (1, (1, 12, 3, 8, 12)), "context": (2, (1, 256, 32)), "tokens": 7, "sigma": 0.7}
DECODE = (3, (1, 12, 3, 4, 6))
# VAEDecodeTiled's (tile_size, overlap, temporal_size, temporal_overlap), seed, latent shape: tiles of 2 latent frames
# (12 // 6) overlapping by 1 and of 8x8 latent pixels overlapping by 2
TILED = ((64, 16, 12, 6), 4, (1, 12, 5, 10, 12))
# name -> (seed, frames, height, width) of pixels 0..1 to encode: 13 frames at an odd size (centre-cropped to 48x64);
# one frame (the temporal attention's single-frame path)
ENCODE = {"video": (5, 13, 50, 70), "one_frame": (6, 1, 32, 40)}


def tiny_lora(seed: int = 9) -> dict[str, torch.Tensor]:
    """A rank-4 LoRA in three of the names ComfyUI maps for Mochi: the official bare names (lora_A / lora_B),
    diffusion_model.-prefixed ones, and kohya's lora_unet_ with an alpha (tests/models/test_mochi.py draws it too)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, (o, i) in {
        "blocks.0.attn.qkv_x": (192, 64),
        "diffusion_model.blocks.1.mlp_x.w1": (512, 64),
        "lora_unet_t5_yproj": (32, 32),
    }.items():
        down, up = 0.2 * torch.randn(4, i, generator=g), 0.2 * torch.randn(o, 4, generator=g)
        if name.startswith("lora_unet_"):
            out.update(
                {f"{name}.lora_down.weight": down, f"{name}.lora_up.weight": up, f"{name}.alpha": torch.tensor(2.0)}
            )
        else:
            out.update({f"{name}.lora_A.weight": down, f"{name}.lora_B.weight": up})
    return out


def tiny_scaled_fp8(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tiny DiT as a scaled-fp8 file (ComfyUI's mochi_preview_fp8_scaled layout): every linear weight as
    float8_e4m3fn over a per-layer float32 scale_weight, the scaled_fp8 marker; the rest as it is (the test makes
    it the same way). ComfyUI builds every linear layer of such a file in fp8, so each gets its scale."""
    out = {"scaled_fp8": torch.empty(0, dtype=torch.float8_e4m3fn)}
    for key, value in sd.items():
        if key.endswith(".weight") and value.dim() == 2:
            scale = value.float().abs().max() / 448.0
            out[key] = (value.float() / scale).to(torch.float8_e4m3fn)
            out[key[: -len("weight")] + "scale_weight"] = scale.reshape(1)
        else:
            out[key] = value
    return out


def seeded(seed: int, shape) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def tiny_dit(sd: dict) -> dict:
    """model_detection's mochi_preview config at the file's sizes."""
    heads = int(sd["pos_frequencies"].shape[1])
    hidden_x = int(sd["x_embedder.proj.weight"].shape[0])
    # FeedForward keeps 2/3 of hidden * ratio rounded up to 256: ratio 4 gives the tiny file's 256 for both streams
    sizes = {
        "depth": len({k.split(".")[1] for k in sd if k.startswith("blocks.")}),
        "num_heads": heads,
        "hidden_size_x": hidden_x,
        "hidden_size_y": int(sd["t5_yproj.weight"].shape[0]),
        "t5_feat_dim": int(sd["t5_yproj.weight"].shape[1]),
        "mlp_ratio_x": 4.0,
        "mlp_ratio_y": 4.0,
    }
    detect = comfy.model_detection.detect_unet_config

    def detect_tiny(state_dict, key_prefix, metadata=None):
        config = detect(state_dict, key_prefix, metadata=metadata)
        if config is not None and config.get("image_model") == "mochi_preview":
            config = {**config, **sizes}
        return config

    comfy.model_detection.detect_unet_config = detect_tiny
    return sizes


def tiny_encoder_sizes(sd: dict) -> dict:
    """VideoVAE's encoder at the file's sizes: widths (the input projection's, then each downsampling kernel's) and
    residual blocks (before the first downsampling, in each, after the last); the rest as released."""
    count = len({k.split(".")[2] for k in sd if k.startswith("encoder.layers.")})
    widths, before, downs, after = [int(sd["encoder.layers.0.weight"].shape[0])], 0, [], 0
    for i in range(1, count):
        kernel = sd.get(f"encoder.layers.{i}.layers.0.weight")
        if kernel is not None:
            widths.append(int(kernel.shape[0]))
            prefix = f"encoder.layers.{i}.layers."
            downs.append(len({k.split(".")[4] for k in sd if k.startswith(prefix) and ".stack." in k}))
        elif downs:
            after += 1
        else:
            before += 1
    return {
        "base_channels": widths[0],
        "channel_multipliers": [w // widths[0] for w in widths],
        "num_res_blocks": [before, *downs, after],
    }


def tiny_vae(sd: dict) -> dict:
    """VideoVAE at the file's sizes: the decoder's widths and residual blocks (expansions as released), the
    encoder's (tiny_encoder_sizes)."""
    stages = len({k.split(".")[2] for k in sd if k.startswith("decoder.blocks.")})

    def count(prefix: str) -> int:
        return len({k[len(prefix) :].split(".")[0] for k in sd if k.startswith(prefix) and ".stack." in k})

    res = [count("decoder.blocks.0.")] + [count(f"decoder.blocks.{i}.blocks.") for i in range(1, stages - 1)]
    res.append(count(f"decoder.blocks.{stages - 1}."))
    base = int(sd["decoder.output_proj.weight"].shape[1])
    widths = [int(sd["decoder.blocks.0.0.weight"].shape[0])] + [
        int(sd[f"decoder.blocks.{i}.proj.weight"].shape[1]) for i in range(2, stages - 1)
    ]
    sizes = {
        "base_channels": base,
        "channel_multipliers": [1] + [w // base for w in reversed(widths)],
        "num_res_blocks": list(reversed(res)),
    }
    encoder = tiny_encoder_sizes(sd)

    class TinyVideoVAE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.decoder = genmo_vae.Decoder(
                out_channels=3,
                latent_dim=12,
                temporal_expansions=[1, 2, 3],
                spatial_expansions=[2, 2, 2],
                has_attention=[False] * 5,
                padding_mode="replicate",
                output_norm=False,
                nonlinearity="silu",
                output_nonlinearity="silu",
                causal=True,
                **sizes,
            )

            self.encoder = genmo_vae.Encoder(
                in_channels=15,
                latent_dim=12,
                temporal_reductions=[1, 2, 3],
                spatial_reductions=[2, 2, 2],
                prune_bottlenecks=[False] * 5,
                has_attentions=[False, True, True, True, True],
                affine=True,
                bias=True,
                input_is_conv_1x1=True,
                padding_mode="replicate",
                **encoder,
            )

        def encode(self, x):
            return self.encoder(x).mode()

        def decode(self, x):
            return self.decoder(x)

    genmo_vae.VideoVAE = TinyVideoVAE
    return {"decoder": sizes, "encoder": encoder}


def main() -> None:
    from comfy_extras import nodes_mochi, nodes_video

    torch.set_num_threads(1)
    models = f"{WORKSPACE}/models"
    dit_sd = comfy.utils.load_torch_file(f"{models}/{DIT}")
    vae_sd = comfy.utils.load_torch_file(f"{models}/{VAE}")
    out = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_mochi.py",
        "files": {p: sha256(f"{models}/{p}") for p in (DIT, VAE, TEXT_ENCODER)},
        "dit_sizes": tiny_dit(dit_sd),
        "vae_sizes": tiny_vae(vae_sd),
    }
    tiny_t5_in_comfyui(f"{models}/{TEXT_ENCODER}", VOCAB, comfy.text_encoders.genmo)

    patcher = comfy.sd.load_diffusion_model_state_dict(dit_sd)
    model = patcher.model
    out["model_config"] = type(model.model_config).__name__
    out["unet_dtype"] = str(model.get_dtype())
    x, context = seeded(*FORWARD["x"]), seeded(*FORWARD["context"])
    mask = torch.zeros(1, context.shape[1], dtype=torch.long)
    mask[:, : FORWARD["tokens"]] = 1
    sigma = torch.tensor([FORWARD["sigma"]])
    with torch.no_grad():
        raw = model.diffusion_model(
            x, model.model_sampling.timestep(sigma), context, attention_mask=mask, num_tokens=FORWARD["tokens"]
        )
        denoised = model.apply_model(x, sigma, c_crossattn=context, attention_mask=mask, num_tokens=FORWARD["tokens"])
    out["forward"] = {**FORWARD, "raw": b64(raw), "apply_model": b64(denoised)}
    sigmas = model.model_sampling.sigmas
    out["model_sampling"] = {"sigma_min": float(sigmas[0]), "sigma_max": float(sigmas[-1]), "count": len(sigmas)}

    vae = comfy.sd.VAE(sd=vae_sd)
    latent = seeded(*DECODE)
    frames = vae.decode(latent)
    out["decode"] = {
        "seed": DECODE[0],
        "shape": list(DECODE[1]),
        "vae_dtype": str(vae.vae_dtype),
        "frames": b64(frames, 8192),
    }

    out["encode"] = {}
    for name, (seed, frames, height, width) in ENCODE.items():
        pixels = torch.rand(frames, height, width, 3, generator=torch.Generator().manual_seed(seed))
        out["encode"][name] = b64(vae.encode(pixels))

    import nodes

    settings, seed, shape = TILED
    (tiled,) = nodes.VAEDecodeTiled().decode(vae, {"samples": seeded(seed, shape)}, *settings)
    out["tiled"] = {"settings": list(settings), "seed": seed, "shape": list(shape), "image": b64(tiled, 8192)}

    clip = comfy.sd.load_clip(ckpt_paths=[f"{models}/{TEXT_ENCODER}"], clip_type=comfy.sd.CLIPType.MOCHI)
    with open(f"{REPO}/workflows_json/mochi_t2v.json") as f:
        prompt = json.load(f)
    out["text"] = []
    for text in [v["inputs"]["text"] for v in prompt.values() if v["class_type"] == "CLIPTextEncode"]:
        tokens = clip.tokenize(text)
        ((cond, extra),) = clip.encode_from_tokens_scheduled(tokens)
        out["text"].append(
            {
                "prompt": text,
                "tokens": tokens["t5xxl"],
                "cond": b64(cond, 2048),
                "attention_mask": b64(extra["attention_mask"]),
            }
        )

    for folder in ("diffusion_models", "text_encoders", "vae"):
        folder_paths.add_model_folder_path(folder, f"{models}/{folder}", is_default=True)
    classes = node_classes(nodes_mochi, nodes_video)
    captured = {}

    def capture(class_type: str, inputs: dict):
        if class_type in ("KSampler", "VAEDecode"):
            captured[class_type] = run_node(classes[class_type], inputs)
            return captured[class_type]
        return None

    (decode,) = [k for k, v in prompt.items() if v["class_type"] == "VAEDecode"]
    frames_prompt = {**prompt, "900": {"class_type": "SaveImage", "inputs": {"images": [decode, 0]}}}
    run_prompt(frames_prompt, classes, capture, max_values=MAX_RECORDED_VALUES)
    # a LoRA at strength 0.8 on the DiT (it patches this loaded model in place; the workflow loads its own)
    lora_model, _ = comfy.sd.load_lora_for_models(patcher, None, tiny_lora(), 0.8, 0)
    comfy.model_management.load_models_gpu([lora_model])
    with torch.no_grad():
        with_lora = lora_model.model.apply_model(
            x, sigma, c_crossattn=context, attention_mask=mask, num_tokens=FORWARD["tokens"]
        )
    out["lora"] = {"strength": 0.8, "apply_model": b64(with_lora)}
    fp8_sd = tiny_scaled_fp8(comfy.utils.load_torch_file(f"{models}/{DIT}"))  # the first load emptied dit_sd
    fp8 = comfy.sd.load_diffusion_model_state_dict(fp8_sd).model
    out["fp8"] = {"unet_dtype": str(fp8.get_dtype()), "scaled_fp8": str(fp8.model_config.scaled_fp8)}
    with torch.no_grad():
        out["fp8"]["apply_model"] = b64(
            fp8.apply_model(x, sigma, c_crossattn=context, attention_mask=mask, num_tokens=FORWARD["tokens"])
        )
    out["workflow"] = {
        "prompt": prompt,
        "latent": b64(captured["KSampler"][0]["samples"]),
        "frames": png_rgb(captured["VAEDecode"][0], MAX_RECORDED_VALUES),
    }
    write_json(OUT, out)


if __name__ == "__main__":
    main()
