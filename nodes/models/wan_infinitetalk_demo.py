"""wan-infinitetalk-tiny: deterministic tiny files for InfiniteTalk (video_wan2_1_infinitetalk):
- model_patches/wan2.1_infiniteTalk_tiny.safetensors: the audio patch in the layout of ComfyUI's model_patches
  wan2.1_infiniteTalk_{single,multi}_fp16 (nodes.models.wan_multitalk): `audio_proj.{proj1, proj1_vf, proj2,
  proj3, norm}` (32 audio tokens as released, 16 wide, 32 hidden, for the tiny wav2vec 2.0 encoder's 24 layers x
  64 features: nodes.models.wan_s2v_demo) and `blocks.N.{norm_x, audio_cross_attn.{q_linear, kv_linear, proj}}`
  for 2 blocks 256 wide; float16 as released;
- diffusion_models/wan2.1_i2v_480p_14B_2heads_tiny.safetensors: Wan 2.1 image-to-video 14B's layout (36 input
  channels, the CLIP image embedding, image keys in the cross-attention) with two 128-wide heads, 2 blocks: the two
  speakers' maps average two halves of the heads, which a one-head model does not have (wan-tiny's i2v file);
  bfloat16;
- loras/wan2.1_i2v_14B_2heads_lightx2v_lora_tiny.safetensors: a rank-4 LoRA on its blocks in lightx2v's names (the
  template loads lightx2v's I2V 14B 480p distill LoRA).
Same seed -> byte-identical files."""

from __future__ import annotations

import math
from pathlib import Path

import torch
from diffusers import WanTransformer3DModel
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.wan import HEAD_DIM
from nodes.models.wan_demo import CLIP_VISION_WIDTH, TEXT_WIDTH, transformer_to_wan
from nodes.models.wan_multitalk import VAE_STRIDE, WINDOW, MultiTalkPatch
from nodes.models.wan_s2v_demo import lightx2v_lora
from nodes.output_claims import write_atomic

SEED = 39
HEADS = 2
FILES = {
    "patch": "model_patches/wan2.1_infiniteTalk_tiny.safetensors",
    "wan": "diffusion_models/wan2.1_i2v_480p_14B_2heads_tiny.safetensors",
    "lora": "loras/wan2.1_i2v_14B_2heads_lightx2v_lora_tiny.safetensors",
}
SIZES = {
    "dim": HEADS * HEAD_DIM,
    "width": 16,
    "hidden": 32,
    "tokens": 32,
    "blocks": 2,
    "heads": HEADS,
    "features": 24 * 64,
}


def infinitetalk_patch(seed: int = SEED) -> dict[str, torch.Tensor]:
    """The tiny patch's tensors, float16: matrices at 1 / sqrt(fan-in), the rest small, norm scales around 1."""
    s = dict(SIZES)
    s["first_in"] = WINDOW * s["features"]
    s["latter_in"] = (WINDOW + VAE_STRIDE - 1) * s["features"]
    with torch.device("meta"):
        module = MultiTalkPatch(s)
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, p in sorted(module.state_dict().items()):
        if "norm" in name and name.endswith("weight"):
            t = 1 + 0.1 * torch.randn(p.shape, generator=gen)
        elif p.dim() == 2:
            t = torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1])
        else:
            t = 0.1 * torch.randn(p.shape, generator=gen)
        out[name] = t.to(torch.float16).contiguous()
    return out


def wan_i2v(seed: int = SEED) -> dict[str, torch.Tensor]:
    """The two-head Wan 2.1 image-to-video model's tensors in Wan's layout, bfloat16."""
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        model = WanTransformer3DModel(
            patch_size=(1, 2, 2),
            num_attention_heads=HEADS,
            attention_head_dim=HEAD_DIM,
            in_channels=36,
            out_channels=16,
            text_dim=TEXT_WIDTH,
            freq_dim=256,
            ffn_dim=256,
            num_layers=2,
            image_dim=CLIP_VISION_WIDTH,
            added_kv_proj_dim=HEADS * HEAD_DIM,
        )
        randomize_constants(model, gen)
    sd = transformer_to_wan(model.state_dict())
    return {k: v.to(torch.bfloat16).contiguous() for k, v in sorted(sd.items())}


def build_demo_wan_infinitetalk(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write wan-infinitetalk-tiny under a ComfyUI models folder; returns the paths written."""
    written = []
    model = wan_i2v(seed)
    for name, sd in (("patch", infinitetalk_patch(seed)), ("wan", model), ("lora", lightx2v_lora(model, seed))):
        path = Path(models_dir) / FILES[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp, metadata={"format": "pt"}))
        written.append(path)
    return written
