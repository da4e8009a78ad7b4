"""Tiny PixArt-α and PixArt-Σ DiTs for `demo-models`, in the authors' single-file layout (nodes.models.pixart):
diffusion_models/PixArt-XL-2-1024-MS_tiny.safetensors (α: size and aspect-ratio embedders, its stored 64x64-latent
`pos_embed` table) and diffusion_models/PixArt-Sigma-XL-2-1024-MS_tiny.safetensors (Σ: no table, positions follow
each image). Two 72-wide heads (the release has 16), one block, text states 32 wide: flux-tiny-t5's width, the T5
that CLIPLoader type pixart loads for them; sd1-tiny-vae decodes both. Same seed -> same bytes."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.pixart import HEAD_WIDTH, PixArtNet, positions
from nodes.output_claims import write_atomic

SEED = 37
ALPHA = "diffusion_models/PixArt-XL-2-1024-MS_tiny.safetensors"
SIGMA = "diffusion_models/PixArt-Sigma-XL-2-1024-MS_tiny.safetensors"
WIDTH, T5_WIDTH, TRAINED_LATENT = 2 * HEAD_WIDTH, 32, 64
TOKENS = 120  # the release's caption length (y_embedder.y_embedding rows)


def tiny_pixart_state_dict(alpha: bool, seed: int = SEED) -> dict[str, torch.Tensor]:
    config = {
        "width": WIDTH,
        "in_channels": 4,
        "patch": 2,
        "depth": 1,
        "mlp_width": 4 * WIDTH,
        "caption_channels": T5_WIDTH,
        "out_channels": 8,  # eps and the learned variance
        "micro_condition": alpha,
        "pe_interpolation": None,
    }
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + int(alpha))
        net = PixArtNet(config)
        gen = torch.Generator().manual_seed(seed + int(alpha))
        with torch.no_grad():
            for p in net.parameters():  # unit-scale draws keep the one block's outputs away from zero
                p.copy_(torch.randn(p.shape, generator=gen) * (p[0].numel() if p.ndim > 1 else p.numel()) ** -0.5)
        randomize_constants(net, gen)
        sd = {k: v.contiguous() for k, v in net.state_dict().items()}
        sd["y_embedder.y_embedding"] = torch.randn(TOKENS, T5_WIDTH, generator=gen) * T5_WIDTH**-0.5
        if alpha:  # the authors' files keep the training size's table (ComfyUI reads its length)
            side = TRAINED_LATENT // 2
            sd["pos_embed"] = positions(WIDTH, side, side, 1.0, side, torch.float32, "cpu")[None]
    return {k: v.to(torch.float16) for k, v in sd.items()}


def build_demo_pixart(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write the tiny PixArt-α and PixArt-Σ files under a ComfyUI models folder; returns the paths written."""
    written = []
    for name, alpha in ((ALPHA, True), (SIGMA, False)):
        path = Path(models_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        sd = tiny_pixart_state_dict(alpha, seed)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp, metadata={"format": "pt"}))
        written.append(path)
    return written


def tiny_diffusers_pixart_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    """A tiny PixArt-α in diffusers' PixArtTransformer2DModel layout (the Hugging Face repos' transformer/ file), for
    the loader's diffusers branch: diffusers' own module and names, random weights, PixArt's sizes as above."""
    from diffusers import PixArtTransformer2DModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 2)
        net = PixArtTransformer2DModel(
            num_attention_heads=WIDTH // HEAD_WIDTH,
            attention_head_dim=HEAD_WIDTH,
            in_channels=4,
            out_channels=8,
            num_layers=1,
            cross_attention_dim=WIDTH,
            caption_channels=T5_WIDTH,
            sample_size=TRAINED_LATENT,
            use_additional_conditions=True,
            norm_type="ada_norm_single",
        )
        gen = torch.Generator().manual_seed(seed + 2)
        with torch.no_grad():
            for p in net.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) * (p[0].numel() if p.ndim > 1 else p.numel()) ** -0.5)
        return {k: v.to(torch.float16).contiguous() for k, v in net.state_dict().items()}


def write_diffusers_pixart(path: Path, seed: int = SEED) -> Path:
    sd = tiny_diffusers_pixart_state_dict(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lambda tmp: save_file(sd, tmp, metadata={"format": "pt"}))
    return path


LORA_RANK = 4
# LoRAs for the tiny PixArt-Σ in the two kinds of names ComfyUI's lora.py reads for PixArt: diffusers' (peft's
# lora_A / lora_B under `transformer.`, q/k/v apart) and its own (kohya's lora_down / lora_up / alpha on the joined
# layers); (name, rows, columns).
DIFFUSERS_LORA_LAYERS = (
    ("transformer_blocks.0.attn1.to_q", WIDTH, WIDTH),
    ("transformer_blocks.0.attn1.to_v", WIDTH, WIDTH),
    ("transformer_blocks.0.attn2.to_k", WIDTH, WIDTH),
    ("transformer_blocks.0.ff.net.0.proj", 4 * WIDTH, WIDTH),
    ("proj_out", 32, WIDTH),
)
NATIVE_LORA_LAYERS = (
    ("blocks.0.attn.qkv", 3 * WIDTH, WIDTH),
    ("blocks.0.cross_attn.kv_linear", 2 * WIDTH, WIDTH),
    ("t_block.1", 6 * WIDTH, WIDTH),
)


def write_tiny_pixart_loras(folder: Path, seed: int = SEED) -> dict[str, Path]:
    """Write pixart-sigma-tiny-lora-diffusers.safetensors and pixart-sigma-tiny-lora-kohya.safetensors; returns them
    by kind. Not demo-models files: the LoRA tests write them."""
    gen = torch.Generator().manual_seed(seed + 3)

    def pair(rows: int, cols: int) -> tuple[torch.Tensor, torch.Tensor]:
        down = torch.randn(LORA_RANK, cols, generator=gen) * cols**-0.5
        return down, torch.randn(rows, LORA_RANK, generator=gen) * 0.2

    diffusers, native = {}, {}
    for name, rows, cols in DIFFUSERS_LORA_LAYERS:
        down, up = pair(rows, cols)
        diffusers[f"transformer.{name}.lora_A.weight"], diffusers[f"transformer.{name}.lora_B.weight"] = down, up
    for name, rows, cols in NATIVE_LORA_LAYERS:
        down, up = pair(rows, cols)
        key = "lora_unet_" + name.replace(".", "_")
        native[f"{key}.lora_down.weight"], native[f"{key}.lora_up.weight"] = down, up
        native[f"{key}.alpha"] = torch.tensor(2.0)
    paths = {}
    for kind, sd in (("diffusers", diffusers), ("kohya", native)):
        path = Path(folder) / f"pixart-sigma-tiny-lora-{kind}.safetensors"
        path.parent.mkdir(parents=True, exist_ok=True)
        half = {k: v.to(torch.float16).contiguous() for k, v in sd.items()}
        write_atomic(path, lambda tmp, half=half: save_file(half, tmp))
        paths[kind] = path
    return paths
