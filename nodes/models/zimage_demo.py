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


def build_demo_zimage(models_dir: Path, seed: int = 0) -> list[Path]:
    """Write z-image-turbo-tiny's files under a ComfyUI models folder; returns the paths written."""
    written = []
    with torch.random.fork_rng(devices=[]):  # the builders seed torch's global generator
        sds = tiny_zimage_state_dicts(seed)
    for part, sd in sds.items():
        path = Path(models_dir) / FILES[part]
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp))
        written.append(path)
    return written
