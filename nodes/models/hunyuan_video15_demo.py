"""hunyuan-video-1.5-tiny: a deterministic tiny HunyuanVideo 1.5 in the layouts its published files have, four files:
- diffusion_models/hunyuanvideo1.5_tiny.safetensors: the DiT in the names ComfyUI reads (`double_blocks.N.img_attn_qkv`
  fused, `txt_in.individual_token_refiner.blocks.N`, `final_layer.adaLN_modulation.1` as (shift, scale),
  `vision_in.proj.{0,1,3,4}`, `cond_type_embedding`, `byt5_in.fc1..3`), 2 heads of ComfyUI's fixed 128, two double
  blocks, two token-refiner blocks, 65 input channels (noise, image latent, mask) as the i2v and t2v files have;
  taking the 32-wide states of the tiny Qwen2.5-VL (nodes.models.qwen_image_demo) and of sigclip-vision-tiny
  (nodes.models.redux_demo: ComfyUI fixes SigLIP so400m's 1152 there, which its recorder gives the tiny width); the
  ByT5 glyph mapper from hunyuan-image-2.1-tiny's 32-wide ByT5 through 64 (ComfyUI fixes 1472 -> 2048 -> 2048);
- vae/hunyuanvideo15_vae_tiny.safetensors: the causal 16x / 4x VAE in the authors' names (`encoder.down.N.block.M`,
  `.downsample.conv.conv`, `decoder.up.N.upsample.conv.conv`, `mid.attn_1.q`, RMS `gamma`), five stages 32..64
  wide, one resnet each;
- text_encoders/qwen_2.5_vl_7b_hunyuan_video15_tiny.safetensors: a Qwen2.5-VL language model in the published names
  (`model.*`, the real vocabulary, 32 wide, ComfyUI's 128-wide heads), four layers so that ComfyUI's layer -3 exists
  (the shape of Hunyuan Image 2.1's tiny one, its own seed);
- latent_upscale_models/hunyuanvideo15_latent_upsampler_1080p_tiny.safetensors: the 1080p latent upsampler in its
  published names (`conv_in.conv`, `up.N.block.M.conv1.conv`, `nin_shortcut`, RMS `gamma`), stages 64 and 32 wide,
  three resnets each.
bfloat16 like the published files. Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import AutoencoderKLHunyuanVideo15, HunyuanVideo15Transformer3DModel
from diffusers.models.transformers.transformer_hunyuan_video15 import HunyuanVideo15ByT5TextProjection
from safetensors.torch import save_file
from transformers import Qwen2Config, Qwen2Model

from nodes.models.flux_demo import randomize_constants
from nodes.models.hunyuan_image_demo import BYT5_MAPPER_WIDTH, BYT5_WIDTH
from nodes.models.hunyuan_image_demo import dit_to_authors as shared_to_authors
from nodes.models.hunyuan_video15 import to_diffusers_layout
from nodes.models.hunyuan_video15_upsampler import LatentUpsampler1080p
from nodes.models.hunyuan_video15_vae import to_diffusers_layout as vae_to_diffusers
from nodes.models.qwen_image_demo import TEXT_WIDTH, VOCAB
from nodes.models.qwen_image_text import HEAD_DIM, RMS_EPS, ROPE_THETA
from nodes.models.redux_demo import SIGLIP_SIZES
from nodes.output_claims import write_atomic

SEED = 1515
FILES = {
    "transformer": "diffusion_models/hunyuanvideo1.5_tiny.safetensors",
    "vae": "vae/hunyuanvideo15_vae_tiny.safetensors",
    "text_encoder": "text_encoders/qwen_2.5_vl_7b_hunyuan_video15_tiny.safetensors",
    "latent_upsampler": "latent_upscale_models/hunyuanvideo15_latent_upsampler_1080p_tiny.safetensors",
}
TEXT_LAYERS = 4
DIT_CONFIG = {
    "in_channels": 65,
    "out_channels": 32,
    "num_attention_heads": 2,
    "attention_head_dim": 128,
    "num_layers": 2,
    "num_refiner_layers": 2,
    "mlp_ratio": 4.0,
    "patch_size": 1,
    "patch_size_t": 1,
    "text_embed_dim": TEXT_WIDTH,
    "text_embed_2_dim": BYT5_WIDTH,  # hunyuan-image-2.1-tiny's glyph ByT5 (ComfyUI fixes ByT5-small's 1472)
    "image_embed_dim": SIGLIP_SIZES.width,
    "rope_axes_dim": (16, 56, 56),
}
VAE_CONFIG = {
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 32,
    "block_out_channels": (32, 32, 64, 64, 64),
    "layers_per_block": 1,
    "spatial_compression_ratio": 16,
    "temporal_compression_ratio": 4,
}
_OWN_BACK = {
    "image_embedder.norm_in.": "vision_in.proj.0.",
    "image_embedder.linear_1.": "vision_in.proj.1.",
    "image_embedder.linear_2.": "vision_in.proj.3.",
    "image_embedder.norm_out.": "vision_in.proj.4.",
    "cond_type_embed.": "cond_type_embedding.",
    "context_embedder_2.norm.": "byt5_in.layernorm.",
    "context_embedder_2.linear_1.": "byt5_in.fc1.",
    "context_embedder_2.linear_2.": "byt5_in.fc2.",
    "context_embedder_2.linear_3.": "byt5_in.fc3.",
}


def dit_to_authors(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' HunyuanVideo15Transformer3DModel tensors -> the file's names; nodes.models.hunyuan_video15 must
    map them back."""
    own, shared = {}, {}
    for key, value in sd.items():
        old = next((o + key[len(n) :] for n, o in _OWN_BACK.items() if key.startswith(n)), None)
        if old is not None:
            own[old] = value
        elif key.startswith("time_embed."):
            shared["time_guidance_embed." + key[len("time_embed.") :]] = value
        else:
            shared[key] = value
    out = {**shared_to_authors(shared), **own}
    back = to_diffusers_layout(out)
    if back.keys() != sd.keys() or any(not torch.equal(back[k], sd[k]) for k in sd):
        raise AssertionError("the HunyuanVideo 1.5 transformer layout does not convert back")
    return out


def vae_to_authors(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """AutoencoderKLHunyuanVideo15 tensors -> the authors' names; nodes.models.hunyuan_video15_vae maps them back."""
    mid = {"resnets.0.": "block_1.", "attentions.0.": "attn_1.", "resnets.1.": "block_2."}
    attn = {"to_q.": "q.", "to_k.": "k.", "to_v.": "v."}
    out = {}
    for key, value in sd.items():
        part, rest = key.split(".", 1)
        if rest.startswith("mid_block."):
            rest = rest[len("mid_block.") :]
            head = next(m for m in mid if rest.startswith(m))
            tail = rest[len(head) :]
            tail = next((a + tail[len(d) :] for d, a in attn.items() if tail.startswith(d)), tail)
            new = f"{part}.mid.{mid[head]}{tail}"
        elif rest.startswith(("down_blocks.", "up_blocks.")):
            stage, i, kind, j, tail = rest.split(".", 4)
            where = f"block.{j}" if kind == "resnets" else ("downsample" if stage == "down_blocks" else "upsample")
            new = f"{part}.{stage[: -len('_blocks')]}.{i}.{where}.{tail}".replace(".conv_shortcut.", ".nin_shortcut.")
        else:
            new = key
        out[new] = value
    back = vae_to_diffusers(out)
    if back.keys() != sd.keys() or any(not torch.equal(back[k], sd[k]) for k in sd):
        raise AssertionError("the HunyuanVideo 1.5 VAE layout does not convert back")
    return out


def tiny_hunyuan_video15_state_dicts(seed: int = SEED) -> dict[str, dict[str, torch.Tensor]]:
    """The four files' tensors, in the published layouts and bfloat16."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        transformer = HunyuanVideo15Transformer3DModel(**DIT_CONFIG)
        transformer.context_embedder_2 = HunyuanVideo15ByT5TextProjection(  # diffusers fixes the mapper 2048 wide
            BYT5_WIDTH, BYT5_MAPPER_WIDTH, DIT_CONFIG["num_attention_heads"] * DIT_CONFIG["attention_head_dim"]
        )
        vae = AutoencoderKLHunyuanVideo15(**VAE_CONFIG)
        randomize_constants(transformer, gen)  # norm scales start at one: a skipped or swapped norm would not show
        randomize_constants(vae, gen)
        text = Qwen2Model(
            Qwen2Config(
                vocab_size=VOCAB,
                hidden_size=TEXT_WIDTH,
                intermediate_size=64,
                num_hidden_layers=TEXT_LAYERS,
                num_attention_heads=2,
                num_key_value_heads=1,
                head_dim=HEAD_DIM,
                rope_theta=ROPE_THETA,
                rms_norm_eps=RMS_EPS,
            )
        )
        randomize_constants(text, gen)
        upsampler = LatentUpsampler1080p(32, 32, (64, 32), 3)
        randomize_constants(upsampler, gen)
    sds = {
        "transformer": dit_to_authors(transformer.state_dict()),
        "vae": vae_to_authors(vae.state_dict()),
        "text_encoder": {f"model.{k}": v for k, v in text.state_dict().items()},
        "latent_upsampler": {
            k.replace(".nin_shortcut.conv.", ".nin_shortcut."): v for k, v in upsampler.state_dict().items()
        },
    }
    return {name: {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()} for name, sd in sds.items()}


def build_demo_hunyuan_video15(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write hunyuan-video-1.5-tiny under a ComfyUI models folder; returns the paths written."""
    written = []
    for name, sd in tiny_hunyuan_video15_state_dicts(seed).items():
        path = Path(models_dir) / FILES[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp, metadata={"format": "pt"}))
        written.append(path)
    return written
