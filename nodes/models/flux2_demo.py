"""Deterministic tiny FLUX.2 Klein files (`flux2-klein-tiny`), written in the layouts users download: the
transformer in BFL layout (diffusion_models/, as flux-2-klein-4b.safetensors), the VAE in BFL's ldm layout with
its batch-norm statistics (vae/, as flux2-vae.safetensors) and a Qwen3 text encoder in ComfyUI's layout
(text_encoders/, as qwen_3_4b.safetensors) with Qwen3's real vocabulary and enough layers for Klein's
hidden-state taps (9, 18, 27), at tiny widths. The transformer has FLUX.2's real 128-wide heads and RoPE axes,
so no config file is needed anywhere. Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import AutoencoderKLFlux2, Flux2Transformer2DModel
from safetensors.torch import save_file

from nodes.models.flux2_keys import diffusers_to_bfl
from nodes.models.flux_demo import randomize_constants
from nodes.models.vae import diffusers_to_ldm
from nodes.output_claims import write_atomic

NAME = "flux2-klein-tiny"
SEED = 7
TEXT_WIDTH = 16  # the tiny Qwen3's hidden size
TEXT_TAPS = 3  # Klein's context: the states entering 3 Qwen3 layers, side by side
QWEN3_VOCAB = 151936  # Qwen3-4B's embedding rows (the tokenizer's 151,665 ids, padded)
QWEN3_LAYERS = 28  # enough for Klein's last tap, the state entering layer 27
FILES = {
    "transformer": f"diffusion_models/{NAME}.safetensors",
    "vae": f"vae/{NAME}-vae.safetensors",
    "text_encoder": f"text_encoders/{NAME}-qwen3.safetensors",
}


def tiny_transformer() -> Flux2Transformer2DModel:
    # Klein is not guidance-distilled: no guidance embedder, as in flux-2-klein-4b.
    return Flux2Transformer2DModel(
        in_channels=128,
        num_layers=1,
        num_single_layers=2,
        attention_head_dim=128,
        num_attention_heads=1,
        joint_attention_dim=TEXT_TAPS * TEXT_WIDTH,
        mlp_ratio=3.0,
        guidance_embeds=False,
    )


def tiny_vae(gen: torch.Generator) -> AutoencoderKLFlux2:
    vae = AutoencoderKLFlux2(
        block_out_channels=(32, 32, 32, 32), layers_per_block=1, latent_channels=32, norm_num_groups=32
    )
    with torch.no_grad():  # statistics of a trained VAE: per-channel means and variances that are not 0 and 1
        vae.bn.running_mean.copy_(0.5 * torch.randn(vae.bn.running_mean.shape, generator=gen))
        vae.bn.running_var.copy_(0.5 + torch.rand(vae.bn.running_var.shape, generator=gen))
    return vae


def tiny_qwen3_state_dict(width: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """A Qwen3 with the real vocabulary and layer count needed by Klein, tiny widths, in ComfyUI's key layout
    (qwen_3_4b.safetensors: `model.` + transformers' Qwen3Model names, no lm_head)."""
    from transformers import Qwen3Config, Qwen3Model

    config = Qwen3Config(
        vocab_size=QWEN3_VOCAB,
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=QWEN3_LAYERS,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=width // 2,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        max_position_embeddings=40960,
        tie_word_embeddings=True,
    )
    model = Qwen3Model(config)
    randomize_constants(model, gen)
    return {f"model.{k}": v.contiguous() for k, v in model.state_dict().items()}


def vae_to_bfl(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """AutoencoderKLFlux2 keys -> BFL's ae layout: ldm block names, quant convs inside encoder/decoder."""
    nested = {"quant_conv.": "encoder.quant_conv.", "post_quant_conv.": "decoder.post_quant_conv."}
    out = {}
    for k, v in diffusers_to_ldm({k: v for k, v in sd.items() if k != "bn.num_batches_tracked"}).items():
        top = next((n for n in nested if k.startswith(n)), None)
        out[(nested[top] + k[len(top) :]) if top else k] = v.contiguous()
    return out


def tiny_flux2_state_dicts(seed: int = SEED) -> dict[str, dict[str, torch.Tensor]]:
    """The tiny model's components in their file layouts (BFL transformer, BFL VAE, ComfyUI Qwen3)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        transformer, vae = tiny_transformer(), tiny_vae(gen)
        for m in (transformer, vae):
            randomize_constants(m, gen)
        text = tiny_qwen3_state_dict(TEXT_WIDTH, gen)
    return {
        "transformer": diffusers_to_bfl(transformer.state_dict()),
        "vae": vae_to_bfl(vae.state_dict()),
        "text_encoder": text,
    }


def build_demo_flux2(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write the tiny FLUX.2 Klein files under a ComfyUI models folder; returns the paths written."""
    sds = tiny_flux2_state_dicts(seed)
    written = []
    for part, rel in FILES.items():
        path = Path(models_dir) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        # One metadata entry only: safetensors writes its metadata map in hash order, which varies per run.
        write_atomic(path, lambda tmp, sd=sds[part]: save_file(sd, tmp, metadata={"format": "pt"}))
        written.append(path)
    return written
