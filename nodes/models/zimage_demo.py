"""Deterministic tiny Z-Image-Turbo (`z-image-turbo-tiny`), written the way Z-Image users have their files:
the transformer under ComfyUI's NextDiT names (diffusion_models/), a Qwen3 text encoder in ComfyUI's
qwen_3_4b layout with Qwen's real 151,936-token vocabulary but 32 wide (text_encoders/), and a tiny Flux
autoencoder in ldm layout (vae/). Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants, tiny_flux_state_dicts
from nodes.models.zimage import make_transformer
from nodes.output_claims import write_atomic

FILES = {
    "transformer": "diffusion_models/z-image-turbo-tiny.safetensors",
    "text_encoder": "text_encoders/qwen_3_4b-tiny.safetensors",
    "vae": "vae/z-image-turbo-tiny-ae.safetensors",
}
# Tiny LoRAs for the tiny transformer in the layouts Z-Image LoRAs are published in: ai-toolkit's (diffusers' names
# under `diffusion_model.`, q/k/v apart, peft lora_A/lora_B, no alpha; the templates' pixel-art LoRA, and the
# layout ComfyUI users' logs show: diffusion_model.layers.N.attention.to_k.lora_A.weight, ...to_out.0...),
# ComfyUI's own saved layout (its NextDiT names, fused qkv, kohya `lora_unet_` or `diffusion_model.`,
# lora_down/lora_up with alpha), and diffusers' `transformer.` / SimpleTuner's `lycoris_` with alphas.
LORA_FILES = {
    "ai_toolkit": "loras/z_image_turbo_lora_tiny.safetensors",
    "comfyui": "loras/z_image_turbo_lora_tiny_comfyui.safetensors",
    "diffusers": "loras/z_image_turbo_lora_tiny_diffusers.safetensors",
}
LORA_RANK = 4
QWEN_VOCAB = 151936  # Qwen3's embedding rows (the tokenizer's 151,665 ids, padded)
TE_HIDDEN = 32
# A narrow Z-Image with the real 128-wide heads (so the real RoPE axes 32/48/48), sized by ComfyUI's rules for
# a 256-wide NextDiT: timestep MLP min(dim, 1024) wide, feed-forward int(8/3 * dim) rounded up to 256.
TINY_CONFIG = {
    "all_patch_size": (2,),
    "all_f_patch_size": (1,),
    "in_channels": 16,
    "dim": 256,
    "n_layers": 2,
    "n_refiner_layers": 1,
    "n_heads": 2,
    "n_kv_heads": 2,
    "norm_eps": 1e-5,
    "qk_norm": True,
    "cap_feat_dim": TE_HIDDEN,
    "rope_theta": 256.0,
    "t_scale": 1000.0,
    "axes_dims": [32, 48, 48],
    "axes_lens": [8192, 4096, 4096],
}
TINY_WIDTHS = {"t_mid": 256, "ffn": 768}

# diffusers' names -> ComfyUI's NextDiT names (the inverse of diffusers' single-file conversion).
_RENAMES = (
    ("all_final_layer.2-1.", "final_layer."),
    ("all_x_embedder.2-1.", "x_embedder."),
    (".attention.to_out.0.", ".attention.out."),
    (".attention.norm_k.", ".attention.k_norm."),
    (".attention.norm_q.", ".attention.q_norm."),
)


def diffusers_to_comfy(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A diffusers ZImageTransformer2DModel state dict under ComfyUI's names (q/k/v fused into qkv)."""
    out: dict[str, torch.Tensor] = {}
    for k, v in sd.items():
        if ".attention.to_k." in k or ".attention.to_v." in k:
            continue
        if ".attention.to_q." in k:
            base = k.replace(".attention.to_q.", ".attention.qkv.")
            out[base] = torch.cat([v, sd[k.replace("to_q", "to_k")], sd[k.replace("to_q", "to_v")]]).contiguous()
            continue
        for old, new in _RENAMES:
            k = k.replace(old, new)
        out[k] = v.contiguous()
    return out


def tiny_qwen3(seed: int = 0, layers: int = 28):
    """A Qwen3Model with the real vocabulary and 28 layers (Flux2-Klein reads layer 27's input), 32 wide."""
    from transformers import Qwen3Config, Qwen3Model

    torch.manual_seed(seed)
    model = Qwen3Model(
        Qwen3Config(
            vocab_size=QWEN_VOCAB,
            hidden_size=TE_HIDDEN,
            intermediate_size=64,
            num_hidden_layers=layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            rope_theta=1_000_000.0,
            rms_norm_eps=1e-6,
            max_position_embeddings=40960,
            tie_word_embeddings=False,
        )
    )
    randomize_constants(model, torch.Generator().manual_seed(seed + 1))
    return model.eval()


def tiny_transformer(seed: int = 0):
    torch.manual_seed(seed)
    model = make_transformer(TINY_CONFIG, TINY_WIDTHS)
    gen = torch.Generator().manual_seed(seed + 2)
    with torch.no_grad():  # diffusers zero-initialises the pad tokens; give them values a mix-up would show
        model.x_pad_token.copy_(torch.randn(model.x_pad_token.shape, generator=gen))
        model.cap_pad_token.copy_(torch.randn(model.cap_pad_token.shape, generator=gen))
    randomize_constants(model, gen)
    return model.eval()


def tiny_zimage_state_dicts(seed: int = 0) -> dict[str, dict[str, torch.Tensor]]:
    """The tiny model's files' contents: ComfyUI-named transformer, ComfyUI-layout Qwen3, ldm Flux VAE."""
    te = {"model." + k: v.contiguous() for k, v in tiny_qwen3(seed).state_dict().items()}
    return {
        "transformer": diffusers_to_comfy(tiny_transformer(seed).state_dict()),
        "text_encoder": te,
        "vae": tiny_flux_state_dicts(seed)["vae"],
    }


def _lora_pair(
    out: dict[str, torch.Tensor], name: str, shape: torch.Size, gen: torch.Generator, parts: tuple[str, str], alpha=None
) -> None:
    rows, cols = shape
    out[f"{name}.{parts[0]}.weight"] = 0.1 * torch.randn(LORA_RANK, cols, generator=gen)
    out[f"{name}.{parts[1]}.weight"] = 0.1 * torch.randn(rows, LORA_RANK, generator=gen)
    if alpha is not None:
        out[f"{name}.alpha"] = torch.tensor(float(alpha))


def tiny_lora_state_dicts(transformer: dict[str, torch.Tensor], seed: int = 0) -> dict[str, dict[str, torch.Tensor]]:
    """The three tiny LoRAs (LORA_FILES' layouts) for the tiny transformer's ComfyUI-named state dict."""
    gen = torch.Generator().manual_seed(seed + 40)
    dim = transformer["x_embedder.weight"].shape[0]
    peft, kohya = ("lora_A", "lora_B"), ("lora_down", "lora_up")
    ai_toolkit: dict[str, torch.Tensor] = {}
    for block in ("layers.0", "layers.1", "noise_refiner.0", "context_refiner.0"):
        for part in ("to_q", "to_k", "to_v", "to_out.0"):
            _lora_pair(ai_toolkit, f"diffusion_model.{block}.attention.{part}", (dim, dim), gen, peft)
        for w in ("w1", "w2", "w3"):
            shape = transformer[f"{block}.feed_forward.{w}.weight"].shape
            _lora_pair(ai_toolkit, f"diffusion_model.{block}.feed_forward.{w}", shape, gen, peft)
    comfyui: dict[str, torch.Tensor] = {}
    for i, layer in enumerate(
        (
            "layers.0.attention.qkv",
            "layers.1.attention.out",
            "noise_refiner.0.attention.qkv",
            "layers.0.adaLN_modulation.0",
            "x_embedder",
            "final_layer.linear",
            "cap_embedder.1",
        )
    ):
        name = "lora_unet_" + layer.replace(".", "_") if i % 2 == 0 else "diffusion_model." + layer
        _lora_pair(comfyui, name, transformer[layer + ".weight"].shape, gen, kohya, alpha=2.0)
    diffusers: dict[str, torch.Tensor] = {}
    for name, shape in (
        ("transformer.layers.1.attention.to_k", (dim, dim)),
        ("transformer.all_x_embedder.2-1", transformer["x_embedder.weight"].shape),
        ("lycoris_layers_0_attention_to_v", (dim, dim)),
        ("lycoris_all_final_layer_2-1_adaLN_modulation_1", transformer["final_layer.adaLN_modulation.1.weight"].shape),
        ("context_refiner.0.attention.to_q", (dim, dim)),
    ):
        _lora_pair(diffusers, name, shape, gen, peft if name.startswith("transformer.") else kohya, alpha=8.0)
    return {"ai_toolkit": ai_toolkit, "comfyui": comfyui, "diffusers": diffusers}


def build_demo_zimage(models_dir: Path, seed: int = 0) -> list[Path]:
    """Write z-image-turbo-tiny's files and its tiny LoRAs under a ComfyUI models folder; returns the paths written."""
    written = []
    with torch.random.fork_rng(devices=[]):  # the builders seed torch's global generator
        sds = tiny_zimage_state_dicts(seed)
    files = dict(FILES)
    for layout, lora in tiny_lora_state_dicts(sds["transformer"], seed).items():
        sds[layout], files[layout] = lora, LORA_FILES[layout]
    for part, sd in sds.items():
        path = Path(models_dir) / files[part]
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp))
        written.append(path)
    return written
