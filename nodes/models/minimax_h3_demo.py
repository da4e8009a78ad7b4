"""Tiny MiniMax H3 files in the published layouts, random weights from a fixed seed, for tests and demos:
the curve-form ("pruned") transformer every MiniMax H3 template names (and FastVideo's FastH3 layout of it), the
video and audio VAEs and the Qwen3-VL text encoder (its language model TEXT_DIM wide, no LM head, which the
conditioning never reads; its vision tower, `model.visual.*` in transformers' names as the published file has it,
reads the first/last frames), under the template's folder names with `_tiny`. Only their widths shrink: the
transformer keeps 24 video and 32 audio latent channels and the 1x2x2 patch, the VAE its six levels, strides and
64-wide decoder heads. TEXT_DIM is the width of the text states the transformer takes (the real Qwen3-VL 32B's is
5120)."""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import AutoencoderKLMiniMaxH3, MiniMaxH3Transformer3DModel
from safetensors.torch import save_file

from nodes.models.minimax_h3 import PRUNED_MARKER, diffusers_to_published
from nodes.models.minimax_h3_audio import to_published
from nodes.models.minimax_h3_vae import from_diffusers
from nodes.output_claims import write_atomic

SEED = 39
TEXT_DIM = 64
CURVE_ROWS = 33
FILES = {
    "transformer": "diffusion_models/minimax_h3_fl2va_pruned_tiny.safetensors",
    "vae": "vae/minimax_h3_video_vae_tiny.safetensors",
    "text_encoder": "text_encoders/qwen3vl_32b_minimax_h3_tiny.safetensors",
    "audio_vae": "vae/minimax_h3_audio_vae_tiny.safetensors",
    "lora": "loras/minimax_h3_lora_tiny.safetensors",
    "fasth3": "diffusion_models/fastvideo_fasth3_tiny.safetensors",
}
TEXT_LAYERS = 2  # the published file is Qwen3-VL-32B cut after layer 50; the tiny one after layer 2


def _randomize(module: torch.nn.Module, gen: torch.Generator, scale: float) -> None:
    # diffusers zero-inits the gates and output scales; random values make every tensor matter
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * scale)


def tiny_text_encoder(layers: int = TEXT_LAYERS) -> torch.nn.Module:
    """A Qwen3-VL whose language model is TEXT_DIM wide, in transformers' names (the published file's layout)."""
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    cfg = Qwen3VLConfig(
        text_config={
            "vocab_size": 151_936,
            "hidden_size": TEXT_DIM,
            "intermediate_size": 96,
            "num_hidden_layers": layers,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 32,
            "rope_parameters": {"rope_type": "default", "rope_theta": 5_000_000.0},
        },
        vision_config={  # nodes.models.qwen3vl_vision reads it: ComfyUI's 16 heads (of 4 here)
            "depth": 2,
            "hidden_size": 64,
            "intermediate_size": 48,
            "num_heads": 16,
            "out_hidden_size": TEXT_DIM,
            "deepstack_visual_indexes": [0],
            "num_position_embeddings": 64,
        },
    )
    model = Qwen3VLForConditionalGeneration(cfg).eval()
    with torch.no_grad():  # the tower's norms start at one and its biases at zero: a skipped one would not show
        for name, p in model.model.visual.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    return model


def tiny_audio_vae(seed: int = SEED) -> torch.nn.Module:
    """MiniMax H3's audio VAE with its 32 latent channels, strides and kernels, its widths shrunk; diffusers'
    weight-normalised form (nodes.models.minimax_h3_audio.to_published folds it into the file's layout)."""
    import warnings

    from diffusers import AutoencoderKLMiniMaxH3Audio

    gen = torch.Generator().manual_seed(seed + 1)  # its own stream: the other files stay as they were
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        torch.manual_seed(seed + 1)
        vae = AutoencoderKLMiniMaxH3Audio(
            encoder_dim=2,
            latent_dim=32,
            latent_channels=32,
            num_attention_heads=8,
            decoder_dim=128,
            latents_mean=torch.randn(32, generator=gen).mul(0.1).tolist(),
            latents_std=(torch.rand(32, generator=gen) + 0.5).tolist(),
        ).eval()
        _randomize(vae, gen, 0.02)
    return vae


def tiny_lora(transformer: dict[str, torch.Tensor], seed: int = SEED, rank: int = 4) -> dict[str, torch.Tensor]:
    """A rank-4 LoRA on every attention qkv projection of the tiny transformer, in ComfyUI's LoRA key layout
    (diffusion_model.<module>.lora_A/B.weight) as the templates' turbo LoRAs (*_comfyui_bf16) have it, where the
    templates' LoRA switch finds a file."""
    gen = torch.Generator().manual_seed(seed + 2)
    out = {}
    for key, weight in transformer.items():
        if key.startswith("blocks.") and key.endswith(".attn.qkv_proj.weight"):
            base = "diffusion_model." + key.removesuffix(".weight")
            out[base + ".lora_A.weight"] = torch.randn(rank, weight.shape[1], generator=gen) * 0.01
            out[base + ".lora_B.weight"] = torch.randn(weight.shape[0], rank, generator=gen) * 0.01
    return out


def tiny_fasth3(transformer: dict[str, torch.Tensor], seed: int = SEED) -> dict[str, torch.Tensor]:
    """FastVideo's FastH3 layout on the tiny transformer: the same weights plus a VSA compression gate
    (blocks.N.attn.to_gate_compress, inner x hidden) per block, which a dense forward never reads."""
    gen = torch.Generator().manual_seed(seed + 3)
    out = dict(transformer)
    for key, weight in transformer.items():
        if key.startswith("blocks.") and key.endswith(".attn.out_proj.weight"):
            gate = key.replace(".attn.out_proj.", ".attn.to_gate_compress.")
            out[gate] = torch.randn(weight.shape[1], weight.shape[0], generator=gen) * 0.05
    return out


def tiny_state_dicts(seed: int = SEED) -> dict[str, dict[str, torch.Tensor]]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        dit = MiniMaxH3Transformer3DModel(
            num_attention_heads=2,
            attention_head_dim=32,
            hidden_size=64,
            num_layers=2,
            num_refiner_layers=1,
            ffn_dim=128,
            text_dim=TEXT_DIM,
            freq_dim=32,
            time_embed_hidden_dim=64,
            time_embed_dim=32,
            rope_freq_dim=4,
        ).eval()
        _randomize(dit, gen, 0.05)
        vae = AutoencoderKLMiniMaxH3(
            block_out_channels=(32,) * 6,
            layers_per_block=1,
            decoder_num_layers=1,
            decoder_num_attention_heads=2,
            decoder_attention_head_dim=64,
            decoder_ffn_mult=1,
            latents_mean=tuple(torch.randn(24, generator=gen).tolist()),
            latents_std=tuple((torch.rand(24, generator=gen) + 0.5).tolist()),
        ).eval()
        _randomize(vae, gen, 0.02)
        text = tiny_text_encoder()
    transformer = diffusers_to_published(dit.state_dict(), dit.rope.inv_freq)
    with torch.no_grad():  # the curve form: the activated time embedding on an even grid of t in [0, 1]
        t = torch.linspace(0.0, 1.0, CURVE_ROWS)
        transformer[PRUNED_MARKER] = torch.nn.functional.silu(dit.time_embedder(dit.time_proj(t))).contiguous()
    transformer = {k: v for k, v in transformer.items() if not k.startswith("time_embedder.")}
    cfg = vae.config
    return {
        "transformer": transformer,
        "vae": from_diffusers(
            vae.state_dict(),
            cfg.decoder_num_attention_heads,
            torch.tensor(cfg.latents_mean),
            torch.tensor(cfg.latents_std),
        ),
        "text_encoder": {k: v for k, v in text.state_dict().items() if not k.startswith("lm_head.")},
        "audio_vae": to_published(tiny_audio_vae(seed)),
        "lora": tiny_lora(transformer, seed),
        "fasth3": tiny_fasth3(transformer, seed),
    }


def build_demo_minimax_h3(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write minimax-h3-tiny under a ComfyUI models folder; returns the paths written."""
    written = []
    for name, sd in tiny_state_dicts(seed).items():
        path = Path(models_dir) / FILES[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        sd = {k: v.contiguous() for k, v in sd.items()}
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp, metadata={"format": "pt"}))
        written.append(path)
    return written
