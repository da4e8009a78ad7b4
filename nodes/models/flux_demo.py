"""Deterministic tiny Flux models, written the way Flux users have their files: the transformer in BFL layout
(diffusion_models/), CLIP-L and T5 in HF layout (text_encoders/), the ldm-layout autoencoder (vae/), and an
all-in-one checkpoint (checkpoints/) with ComfyUI's prefixes, and FLUX.1 Fill's and Canny / Depth's transformers
(the same sizes with their input widths). Same seed -> byte-identical files."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from diffusers import AutoencoderKL, FluxTransformer2DModel
from safetensors.torch import save_file
from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

from nodes.models.flux_configs import CONFIGS_DIR, METADATA_KEY
from nodes.models.flux_keys import diffusers_to_bfl
from nodes.models.vae import diffusers_to_ldm
from nodes.output_claims import write_atomic

CONFIG_NAME = "flux-tiny"
# FLUX.1 Fill (black-forest-labs/flux src/flux/util.py, "flux-dev-fill": in_channels 384, out_channels 64): per
# 2x2 patch the 16 latent channels, the 16 of the masked image's latent and 64 of the 8x8 pixel mask.
FILL_IN_CHANNELS = (16 + 16 + 64) * 4
FILL_SEED_OFFSET = 1000  # its own stream, so the other files keep their bytes
# FLUX.1 Canny / Depth dev (black-forest-labs/flux src/flux/util.py, "flux-dev-canny" / "flux-dev-depth":
# in_channels 128, out_channels 64): per 2x2 patch the 16 latent channels and the 16 of the control image's latent.
CANNY_IN_CHANNELS = (16 + 16) * 4
CANNY_SEED_OFFSET = 2000


def randomize_constants(module: torch.nn.Module, gen: torch.Generator) -> None:
    """Give constant-initialised tensors (norm scales, zero biases) random values, so that every weight is
    distinct and a key mix-up in a conversion changes the outputs."""
    with torch.no_grad():
        for p in module.parameters():
            if p.numel() > 1 and bool((p == p.flatten()[0]).all()):
                p.add_(0.1 * torch.randn(p.shape, generator=gen))


def _tiny_modules(gen: torch.Generator) -> dict[str, torch.nn.Module]:
    config = json.loads((CONFIGS_DIR / CONFIG_NAME / "flux.json").read_text())
    t5_vocab = len(json.loads((CONFIGS_DIR / CONFIG_NAME / config["t5"]["vocab"]).read_text()))
    transformer = FluxTransformer2DModel(
        patch_size=1,
        in_channels=64,
        num_layers=1,
        num_single_layers=2,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=32,
        pooled_projection_dim=32,
        guidance_embeds=True,
        axes_dims_rope=tuple(config["axes_dim"]),
    )
    clip = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=514,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=config["clip_l"]["num_attention_heads"],
            max_position_embeddings=77,
            hidden_act="quick_gelu",
            bos_token_id=512,
            eos_token_id=513,
            pad_token_id=513,
        )
    )
    t5 = T5EncoderModel(
        T5Config(
            vocab_size=t5_vocab,
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=2,
            num_heads=4,
            feed_forward_proj="gated-gelu",
            is_encoder_decoder=False,
            use_cache=False,
        )
    )
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        latent_channels=16,
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        block_out_channels=(32, 32, 32, 32),
        layers_per_block=1,
        norm_num_groups=32,
        use_quant_conv=False,
        use_post_quant_conv=False,
    )
    mods = {"transformer": transformer, "clip_l": clip, "t5xxl": t5, "vae": vae}
    for m in mods.values():
        randomize_constants(m, gen)
    return mods


def tiny_flux_state_dicts(seed: int = 0) -> dict[str, dict[str, torch.Tensor]]:
    """The tiny model's components in their file layouts: BFL transformer, HF CLIP-L/T5, ldm VAE."""
    torch.manual_seed(seed)
    mods = _tiny_modules(torch.Generator().manual_seed(seed))
    t5 = {k: v for k, v in mods["t5xxl"].state_dict().items() if k != "encoder.embed_tokens.weight"}
    return {
        "transformer": diffusers_to_bfl(mods["transformer"].state_dict()),
        "clip_l": {
            ("" if k.startswith("text_model.") else "text_model.") + k: v.contiguous()  # HF 4.x names
            for k, v in mods["clip_l"].state_dict().items()
        },
        "t5xxl": {k: v.contiguous() for k, v in t5.items()},
        "vae": {k: v.contiguous() for k, v in diffusers_to_ldm(mods["vae"].state_dict()).items()},
    }


def tiny_wide_transformer(in_channels: int, seed: int) -> dict[str, torch.Tensor]:
    """A tiny FLUX.1 transformer in BFL layout with flux-tiny's sizes and a wider input (the latent plus what
    concat_image joins to it), its weights drawn from `seed`."""
    torch.manual_seed(seed)
    config = json.loads((CONFIGS_DIR / CONFIG_NAME / "flux.json").read_text())
    transformer = FluxTransformer2DModel(
        patch_size=1,
        in_channels=in_channels,
        out_channels=64,
        num_layers=1,
        num_single_layers=2,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=32,
        pooled_projection_dim=32,
        guidance_embeds=True,
        axes_dims_rope=tuple(config["axes_dim"]),
    )
    randomize_constants(transformer, torch.Generator().manual_seed(seed))
    return diffusers_to_bfl(transformer.state_dict())


def tiny_fill_transformer(seed: int = 0) -> dict[str, torch.Tensor]:
    """The tiny FLUX.1 Fill transformer in BFL layout: flux-tiny's sizes, Fill's input width."""
    return tiny_wide_transformer(FILL_IN_CHANNELS, seed + FILL_SEED_OFFSET)


def tiny_canny_transformer(seed: int = 0) -> dict[str, torch.Tensor]:
    """The tiny FLUX.1 Canny / Depth dev transformer in BFL layout: flux-tiny's sizes, their input width."""
    return tiny_wide_transformer(CANNY_IN_CHANNELS, seed + CANNY_SEED_OFFSET)


def build_demo_flux(models_dir: Path, seed: int = 0) -> list[Path]:
    """Write the tiny Flux files under a ComfyUI models folder; returns the paths written."""
    models_dir = Path(models_dir)
    sds = tiny_flux_state_dicts(seed)
    meta = {METADATA_KEY: CONFIG_NAME}
    prefixed = {
        "transformer": "model.diffusion_model.",
        "vae": "vae.",
        "clip_l": "text_encoders.clip_l.transformer.",
        "t5xxl": "text_encoders.t5xxl.transformer.",
    }
    files = {
        "diffusion_models/flux-tiny.safetensors": sds["transformer"],
        "text_encoders/flux-tiny-clip_l.safetensors": sds["clip_l"],
        "text_encoders/flux-tiny-t5.safetensors": sds["t5xxl"],
        "vae/flux-tiny-ae.safetensors": sds["vae"],
        "checkpoints/flux-tiny.safetensors": {prefixed[c] + k: v for c, sd in sds.items() for k, v in sd.items()},
        "diffusion_models/flux-fill-tiny.safetensors": tiny_fill_transformer(seed),
        "diffusion_models/flux-canny-tiny.safetensors": tiny_canny_transformer(seed),
    }
    written = []
    for rel, sd in files.items():
        path = models_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp, metadata=meta))
        written.append(path)
    return written
