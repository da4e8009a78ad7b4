"""Deterministic tiny PhotoMaker (`photomaker/photomaker-v1-tiny.bin`): a torch file in photomaker-v1.bin's layout,
{"id_encoder": {...}, "lora_weights": {}}, the ID encoder in transformers' and PhotoMaker's names: a two-layer CLIP
vision tower (nodes.models.demo's, 224-pixel input, 14-pixel patches, 16 heads) projecting to 32, a second
projection to 48 and the fuse module at 80 wide, the width of sdxl-tiny's CLIP-L + CLIP-G states (as v1's
768 + 1280 are SDXL's 2048). The tower in float16, the dtype ComfyUI keeps it in; the rest in float32. The LoRA the
real file carries for the SDXL UNet is left empty: ComfyUI does not read it."""

from __future__ import annotations

from pathlib import Path

import torch

from nodes.output_claims import write_atomic

FILE = "photomaker/photomaker-v1-tiny.bin"
# SDXL's two text encoders with the OpenAI vocabulary (sdxl-tiny's are byte-level), so that ComfyUI's own tokenizer
# reads the same prompts: DualCLIPLoader type sdxl on these gives the 80-wide states the fuse module is made for.
CLIP_FILES = {
    "l": "text_encoders/photomaker-tiny-clip_l.safetensors",
    "g": "text_encoders/photomaker-tiny-clip_g.safetensors",
}
# sdxl-tiny's UNet for these encoders (their 80-wide states, CLIP-G's 48-wide pooled output) and a 4-channel VAE
# whose every width is 32, so that ComfyUI's autoencoder (GroupNorm of 32 groups) builds it too: the PhotoMaker
# workflow then runs in ComfyUI as here.
UNET_FILE = "diffusion_models/photomaker-sdxl-unet-tiny.safetensors"
VAE_FILE = "vae/photomaker-sdxl-vae-tiny.safetensors"
VAE_WIDTHS = (32, 32, 32, 32)
SEED = 40
PROJECTIONS = (32, 48)  # CLIP-L's and CLIP-G's widths in sdxl-tiny


def tiny_id_encoder(seed: int = SEED) -> dict[str, torch.Tensor]:
    from nodes.models.demo import tiny_clip_vision
    from nodes.models.photomaker import FuseModule

    tower = tiny_clip_vision(PROJECTIONS[0], seed)  # seeds torch's global generator
    sd = {k: v.detach().half() for k, v in tower.state_dict().items() if not k.endswith("position_ids")}
    hidden = tower.config.hidden_size
    sd["visual_projection_2.weight"] = torch.randn(PROJECTIONS[1], hidden) * 0.2
    fuse = FuseModule(sum(PROJECTIONS))
    sd.update({f"fuse_module.{k}": v.detach().clone() for k, v in fuse.state_dict().items()})
    return sd


def tiny_sdxl_clip(width: int, act: str) -> dict[str, torch.Tensor]:
    """A three-layer CLIP text encoder with a projection, 77 positions, the OpenAI vocabulary, in float16."""
    from transformers import CLIPTextConfig, CLIPTextModelWithProjection

    cfg = CLIPTextConfig(
        vocab_size=49408,
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=3,  # SDXL reads the penultimate layer, which ComfyUI wants below the last
        num_attention_heads=width // 8,  # the tiny CLIPs' 8-wide heads (nodes/models/clip.py)
        max_position_embeddings=77,
        projection_dim=width,  # ComfyUI's CLIP text projection is square
        hidden_act=act,
        bos_token_id=49406,
        eos_token_id=49407,
        pad_token_id=49407,
    )
    sd = CLIPTextModelWithProjection(cfg).state_dict()
    return {k: v.detach().half().contiguous() for k, v in sd.items() if not k.endswith("position_ids")}


def build_demo_photomaker(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write the tiny PhotoMaker file and its SDXL text encoders under a ComfyUI models folder; returns the paths."""
    from safetensors.torch import save_file

    with torch.random.fork_rng(devices=[]):
        data = {"id_encoder": tiny_id_encoder(seed), "lora_weights": {}}
        clips = {"l": tiny_sdxl_clip(32, "quick_gelu"), "g": tiny_sdxl_clip(48, "gelu")}
        vae = tiny_vae()
        unet = tiny_unet()
    path = Path(models_dir) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lambda tmp: torch.save(data, tmp))
    written = [path]
    for side, rel in CLIP_FILES.items():
        out = Path(models_dir) / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        tensors = dict(sorted(clips[side].items()))
        write_atomic(out, lambda tmp, tensors=tensors: save_file(tensors, tmp, metadata={"format": "pt"}))
        written.append(out)
    for rel, tensors in ((VAE_FILE, vae), (UNET_FILE, unet)):
        out = Path(models_dir) / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        tensors = dict(sorted(tensors.items()))
        write_atomic(out, lambda tmp, tensors=tensors: save_file(tensors, tmp, metadata={"format": "pt"}))
        written.append(out)
    return written


def tiny_unet() -> dict[str, torch.Tensor]:
    """sdxl-tiny's UNet design for 80-wide states and a 48-wide pooled output, in ldm names, float16."""
    from nodes.models.demo import tiny_sdxl_unet
    from nodes.models.unet import UNetLayout, diffusers_to_ldm

    unet = tiny_sdxl_unet(sum(PROJECTIONS), PROJECTIONS[1])
    # sdxl-tiny's levels: 32 wide without attention, 64 wide with it
    layout = UNetLayout(4, 4, 0, [32, 64], [[1], [1]], [[0, 0], [1, 1]], 1, sum(PROJECTIONS), True, None)
    return {k: v.to(torch.float16).contiguous() for k, v in diffusers_to_ldm(unet.state_dict(), layout).items()}


def tiny_vae() -> dict[str, torch.Tensor]:
    """The VAE in ldm names (what ComfyUI's VAELoader and ours read), float32."""
    from diffusers import AutoencoderKL

    from nodes.models import vae as vae_mod

    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        latent_channels=4,
        block_out_channels=VAE_WIDTHS,
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        layers_per_block=1,
        norm_num_groups=32,
        sample_size=64,
    )
    return {k: v.detach().contiguous() for k, v in vae_mod.diffusers_to_ldm(vae.state_dict()).items()}
