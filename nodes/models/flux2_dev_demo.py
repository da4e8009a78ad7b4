"""Deterministic tiny FLUX.2 dev files (`flux2-dev-tiny`), in the layouts users download: the transformer in BFL
layout with dev's guidance embedder (diffusion_models/, as flux2_dev_fp8mixed.safetensors) and the Mistral 3 text
encoder in ComfyUI's layout with its Tekken tokenizer inside as `tekken_model` (text_encoders/, as
mistral_3_small_flux2_bf16.safetensors), at tiny widths with enough layers for the taps (10, 20, 30). The VAE is
FLUX.2's (flux2-klein-tiny-vae). Same seed -> byte-identical files."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import torch
from diffusers import Flux2Transformer2DModel
from safetensors.torch import save_file

from nodes.models.flux2_keys import diffusers_to_bfl
from nodes.models.flux2_mistral import HEAD_DIM, LAYERS, RMS_EPS, ROPE_THETA, TEKKEN_KEY
from nodes.models.flux_demo import randomize_constants
from nodes.output_claims import write_atomic

NAME = "flux2-dev-tiny"
SEED = 11
TEXT_WIDTH = 16
FILES = {
    "transformer": f"diffusion_models/{NAME}.safetensors",
    "text_encoder": f"text_encoders/{NAME}-mistral3.safetensors",
}
# Tekken's first special tokens in mistral-common's order (ids 0..19; <pad> is ComfyUI's pad id 11).
SPECIALS = (
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[TOOL_CALLS]",
    "[IMG]",
    "<pad>",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[PREFIX]",
    "[MIDDLE]",
    "[SUFFIX]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
)
MERGES = (b"e ", b"th", b"the", b"in", b"an", b"on")  # a few multi-byte tokens, so the BPE merges something


def tiny_tekken() -> bytes:
    """A tekken.json with every byte and a few merges after the special tokens (ranks as tekken numbers them)."""
    tokens = [bytes([b]) for b in range(256)] + list(MERGES)
    specials = [{"rank": i, "token_str": s, "is_control": True} for i, s in enumerate(SPECIALS)]
    vocab = [{"rank": r, "token_bytes": base64.b64encode(t).decode()} for r, t in enumerate(tokens)]
    config = {
        "pattern": r"[^\s]+|\s+",
        "num_vocab_tokens": len(tokens),
        "default_vocab_size": len(SPECIALS) + len(tokens),
        "default_num_special_tokens": len(SPECIALS),
        "version": "v7",
    }
    return json.dumps({"config": config, "vocab": vocab, "special_tokens": specials}, sort_keys=True).encode()


def tiny_transformer() -> Flux2Transformer2DModel:
    # dev is guidance-distilled (a guidance embedder, as flux2-dev); the context is three Mistral states wide
    return Flux2Transformer2DModel(
        in_channels=128,
        num_layers=1,
        num_single_layers=2,
        attention_head_dim=128,
        num_attention_heads=1,
        joint_attention_dim=len(LAYERS) * TEXT_WIDTH,
        mlp_ratio=3.0,
        guidance_embeds=True,
    )


def tiny_mistral_state_dict(gen: torch.Generator) -> dict[str, torch.Tensor]:
    from transformers import MistralConfig, MistralModel

    tekken = tiny_tekken()
    config = MistralConfig(
        vocab_size=len(SPECIALS) + 256 + len(MERGES),
        hidden_size=TEXT_WIDTH,
        intermediate_size=2 * TEXT_WIDTH,
        num_hidden_layers=max(LAYERS) + 1,
        num_attention_heads=1,
        num_key_value_heads=1,
        head_dim=HEAD_DIM,
        rope_theta=ROPE_THETA,
        rms_norm_eps=RMS_EPS,
        sliding_window=None,
    )
    model = MistralModel(config)
    randomize_constants(model, gen)
    sd = {f"model.{k}": v.contiguous() for k, v in model.state_dict().items()}
    sd[TEKKEN_KEY] = torch.frombuffer(bytearray(tekken), dtype=torch.uint8).clone()
    return sd


def tiny_flux2_dev_state_dicts(seed: int = SEED) -> dict[str, dict[str, torch.Tensor]]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        transformer = tiny_transformer()
        randomize_constants(transformer, gen)
        text = tiny_mistral_state_dict(gen)
    return {"transformer": diffusers_to_bfl(transformer.state_dict()), "text_encoder": text}


def build_demo_flux2_dev(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write the tiny FLUX.2 dev files under a ComfyUI models folder; returns the paths written."""
    sds = tiny_flux2_dev_state_dicts(seed)
    written = []
    for part, rel in FILES.items():
        path = Path(models_dir) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sds[part]: save_file(sd, tmp, metadata={"format": "pt"}))
        written.append(path)
    return written
