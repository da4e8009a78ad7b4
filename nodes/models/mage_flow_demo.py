"""mage-flow-tiny: a deterministic tiny Mage-Flow written in the layouts Comfy-Org/Mage-Flow publishes, bfloat16 like
its bf16 files:
- diffusion_models/mage_flow_tiny.safetensors: the DiT in Qwen-Image's names at patch size 1 (img_in reads the
  128 latent channels), 2 blocks of one 128-wide head, reading 32-wide text (the tiny Qwen3-VL's);
- vae/mage_flow_vae_tiny.safetensors: the Mage-VAE, its encoder under `student.dconv_encoder.`, its decoder under
  `pipeline.`, with a stand-in for the Flux.2 anchor VAE the published file carries (`pipeline.y_embedder.encoder.`,
  `pipeline.y_embedder.bottleneck.`, which nothing reads); 16-pixel patches and 128 latent channels as released,
  widths 32 (encoder head, blocks, CoD decoder) and 8 (pixel head, 8x8 DCT codes), 2 blocks each.
The text encoder is qwen-image-2.1-tiny's Qwen3-VL (text_encoders/qwen3vl_8b_tiny.safetensors,
nodes.models.qwen_image21_demo): 32 wide, with a vision tower ComfyUI's 16 heads fit (Krea 2's tiny Qwen3-VL-4B
has a 16-wide one, too narrow to read pictures). Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import QwenImageTransformer2DModel
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.mage_flow_vae import ANCHOR, DECODER, ENCODER, MageVAENetwork
from nodes.output_claims import write_atomic

SEED = 38
TEXT_WIDTH = 32  # the tiny Qwen3-VL's (nodes.models.qwen_image21_demo)
FILES = {
    "transformer": "diffusion_models/mage_flow_tiny.safetensors",
    "vae": "vae/mage_flow_vae_tiny.safetensors",
}
LATENT, PATCH, WIDTH, PIXEL_WIDTH, FREQS = 128, 16, 32, 8, 8
BOTTLENECK = LATENT  # the patch bottleneck is as wide as the latent: ComfyUI builds the CoD decoder from it


def _vae_sizes() -> dict[str, torch.Tensor]:
    """The tensors whose shapes MageVAENetwork reads its sizes from, on the meta device."""
    shapes = {
        "dconv_encoder.patch_cond_embed.weight": (WIDTH, 3, PATCH, PATCH),
        "dconv_encoder.proj_down.weight": (WIDTH, WIDTH, 1, 1),
        "dconv_encoder.z_proj.weight": (WIDTH, LATENT, 1, 1),
        "dconv_encoder.proj_out.weight": (2 * LATENT, WIDTH, 1, 1),
        "decoder_model.s_embedder.proj1.weight": (BOTTLENECK, 3, PATCH, PATCH),
        "decoder_model.s_embedder.proj2.weight": (WIDTH, BOTTLENECK + WIDTH, 1, 1),
        "decoder_model.x_embedder.embedder.0.weight": (PIXEL_WIDTH, 3 + PIXEL_WIDTH + FREQS * FREQS),
        "decoder_model.dec_net.input_proj.weight": (PIXEL_WIDTH, PIXEL_WIDTH),
        "decoder_model.dec_net.cond_embed.weight": (PATCH * PATCH * PIXEL_WIDTH, WIDTH),
        "decoder_model.y_embedder.decoder.conv_in.weight": (WIDTH, LATENT, 3, 3),
    }
    for i in range(2):
        shapes[f"dconv_encoder.head_blocks.{i}.conv4.weight"] = (2 * WIDTH, WIDTH, 1, 1)
        shapes[f"dconv_encoder.blocks.{i}.conv4.weight"] = (2 * WIDTH, WIDTH, 1, 1)
        shapes[f"decoder_model.blocks.{i}.conv4.weight"] = (2 * WIDTH, WIDTH, 1, 1)
        shapes[f"decoder_model.dec_net.res_blocks.{i}.mlp.0.weight"] = (PIXEL_WIDTH, PIXEL_WIDTH)
    return {k: torch.empty(v, device="meta") for k, v in shapes.items()}


def vae_to_published(sd: dict[str, torch.Tensor], gen: torch.Generator) -> dict[str, torch.Tensor]:
    """MageVAENetwork tensors -> the published names, plus a small stand-in for the anchor VAE."""
    out = {}
    for key, value in sd.items():
        part, _, rest = key.partition(".")
        out[(ENCODER if part == "dconv_encoder" else DECODER) + rest] = value
    for name in ANCHOR:
        out[DECODER + name + "conv.weight"] = torch.randn(4, 3, 1, 1, generator=gen)
    return out


def tiny_mage_flow_state_dicts(seed: int = SEED) -> dict[str, dict[str, torch.Tensor]]:
    """The tiny model's two files' tensors, in the published layouts and bfloat16."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        transformer = QwenImageTransformer2DModel(
            patch_size=1,
            in_channels=LATENT,
            out_channels=LATENT,
            num_layers=2,
            attention_head_dim=128,
            num_attention_heads=1,
            joint_attention_dim=TEXT_WIDTH,
        )
        randomize_constants(transformer, gen)
        vae = MageVAENetwork(_vae_sizes()).to_empty(device="cpu")
        with torch.no_grad():
            for p in vae.parameters():
                fan_in = max(1, p[0].numel()) if p.dim() > 1 else 1
                p.copy_(torch.randn(p.shape, generator=gen) / fan_in**0.5)
    sds = {"transformer": transformer.state_dict(), "vae": vae_to_published(vae.state_dict(), gen)}
    return {name: {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()} for name, sd in sds.items()}


def build_demo_mage_flow(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write mage-flow-tiny under a ComfyUI models folder; returns the paths written."""
    written = []
    for name, sd in tiny_mage_flow_state_dicts(seed).items():
        path = Path(models_dir) / FILES[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp, metadata={"format": "pt"}))
        written.append(path)
    return written
