"""A deterministic tiny SD3, written the way SD3 users have their files: an all-in-one checkpoint
(checkpoints/sd3-tiny.safetensors: `model.diffusion_model.*` MMDiT in ComfyUI's layout, `first_stage_model.*`
16-channel VAE, `text_encoders.clip_l|clip_g|t5xxl.transformer.*`) and the three text encoders as separate
HF-layout files for TripleCLIPLoader, and a one-block ControlNet in diffusers' layout (controlnet/).
Same seed -> byte-identical files.

ComfyUI's MMDiT has 64-wide heads and SD3's text encoder pads the CLIP features to 4096, so the tiny MMDiT is
128 wide (2 heads, 2 joint blocks) and the tiny T5 is 4096 wide (one narrow layer). The T5 shares the tiny
Flux T5's vocabulary (config folder flux-tiny, named in the file metadata)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from diffusers import AutoencoderKL, SD3ControlNetModel, SD3Transformer2DModel
from safetensors.torch import save_file
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection, T5Config, T5EncoderModel

from nodes.models import clip as clip_mod
from nodes.models.flux_configs import CONFIGS_DIR, METADATA_KEY
from nodes.models.flux_demo import CONFIG_NAME as T5_CONFIG
from nodes.models.flux_demo import randomize_constants
from nodes.models.sd3_keys import diffusers_to_mmdit
from nodes.models.tokenizer import BYTE_VOCAB_SIZE
from nodes.models.vae import diffusers_to_ldm
from nodes.output_claims import write_atomic

SEED = 3


def _clip(hidden: int, projection: bool, act: str) -> torch.nn.Module:
    cfg = CLIPTextConfig(
        vocab_size=BYTE_VOCAB_SIZE,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=3,
        num_attention_heads=clip_mod.clip_heads(hidden),
        max_position_embeddings=77,
        projection_dim=hidden,
        hidden_act=act,
        bos_token_id=BYTE_VOCAB_SIZE - 2,
        eos_token_id=BYTE_VOCAB_SIZE - 1,
        pad_token_id=BYTE_VOCAB_SIZE - 1,
    )
    return (CLIPTextModelWithProjection if projection else CLIPTextModel)(cfg)


def _hf_clip(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """transformers 4's file names (`text_model.` level), as CLIP files on disk have them."""
    return {
        ("text_model." + k if not k.startswith(("text_model.", "text_projection")) else k): v.contiguous()
        for k, v in module.state_dict().items()
        if not k.endswith("position_ids")
    }


def tiny_sd3_state_dicts(seed: int = SEED) -> dict[str, dict[str, torch.Tensor]]:
    """The tiny model's components in their file layouts: ComfyUI MMDiT, HF CLIP-L/G and T5, ldm VAE."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        l, g = _clip(32, True, "quick_gelu"), _clip(48, True, "gelu")
        mmdit = SD3Transformer2DModel(
            sample_size=64,
            patch_size=2,
            in_channels=16,
            num_layers=2,
            attention_head_dim=64,
            num_attention_heads=2,
            joint_attention_dim=4096,
            caption_projection_dim=128,
            pooled_projection_dim=32 + 48,
            out_channels=16,
            pos_embed_max_size=32,
        )
        vocab = len(tokenizer_vocab())
        t5 = T5EncoderModel(
            T5Config(
                vocab_size=vocab,
                d_model=4096,
                d_kv=8,
                d_ff=16,
                num_layers=1,
                num_heads=1,
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
        controlnet = SD3ControlNetModel(
            sample_size=64,
            patch_size=2,
            in_channels=16,
            num_layers=1,
            attention_head_dim=64,
            num_attention_heads=2,
            joint_attention_dim=4096,
            caption_projection_dim=128,
            pooled_projection_dim=32 + 48,
            out_channels=16,
            pos_embed_max_size=32,
        )
        for m in (l, g, mmdit, t5, vae, controlnet):
            randomize_constants(m, gen)  # also the zero-initialised ControlNet outputs: no no-op ControlNet
    return {
        "mmdit": diffusers_to_mmdit(mmdit.state_dict()),
        "clip_l": _hf_clip(l),
        "clip_g": _hf_clip(g),
        "t5xxl": {k: v.contiguous() for k, v in t5.state_dict().items() if k != "encoder.embed_tokens.weight"},
        "vae": {k: v.contiguous() for k, v in diffusers_to_ldm(vae.state_dict()).items()},
        "controlnet": {k: v.contiguous() for k, v in controlnet.state_dict().items()},
    }


def tokenizer_vocab() -> list:
    return json.loads((CONFIGS_DIR / T5_CONFIG / "t5_vocab.json").read_text())


def build_demo_sd3(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write the tiny SD3 files under a ComfyUI models folder; returns the paths written."""
    models_dir = Path(models_dir)
    sds = tiny_sd3_state_dicts(seed)
    prefixed = {
        "mmdit": "model.diffusion_model.",
        "vae": "first_stage_model.",
        "clip_l": "text_encoders.clip_l.transformer.",
        "clip_g": "text_encoders.clip_g.transformer.",
        "t5xxl": "text_encoders.t5xxl.transformer.",
    }
    files = {
        "checkpoints/sd3-tiny.safetensors": {
            prefixed[c] + k: v for c, sd in sds.items() if c in prefixed for k, v in sd.items()
        },
        "controlnet/sd3-tiny-controlnet.safetensors": sds["controlnet"],
        "text_encoders/sd3-tiny-clip_l.safetensors": sds["clip_l"],
        "text_encoders/sd3-tiny-clip_g.safetensors": sds["clip_g"],
        "text_encoders/sd3-tiny-t5.safetensors": sds["t5xxl"],
    }
    written = []
    for rel, sd in files.items():
        path = models_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp, metadata={METADATA_KEY: T5_CONFIG}))
        written.append(path)
    return written
