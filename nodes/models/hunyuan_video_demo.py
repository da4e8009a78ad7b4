"""hunyuan-video-tiny: deterministic tiny HunyuanVideo 1.0 files in the published layouts.

- diffusion_models/hunyuan_video_t2v_tiny.safetensors: the text-to-video DiT (16 input channels, a guidance
  embedder, as hunyuan_video_t2v_720p_bf16; ComfyUI reads the "v2 (replace)" image-to-video file the same way);
- diffusion_models/hunyuan_video_i2v_tiny.safetensors: the "v1 (concat)" image-to-video DiT (33 input channels:
  noise, image latent, inverted mask; no guidance embedder);
both 128 wide (one 128-wide head: ComfyUI's rotary axes 16 + 56 + 56 fill it), one double and one single block,
bfloat16 as published, `vector_in` reading the tiny CLIP-L's 32-wide pooled vector (ComfyUI fixes 768; its recorder
gives the file's width) and the refiner the tiny Llama's 16-wide states;
- text_encoders/llava_llama3_tiny.safetensors: a 4-block, 16-wide Llama under llava-llama3's language-model names
  (`model.`), its vocabulary llava-llama3's 128320 rows (Llama 3's, then <image> 128257 and <pad> 128258), float32.
- clip_vision/llava_llama3_vision_tiny.safetensors: llava-llama3's vision file's layout (a CLIP ViT tower in
  transformers' names with its projection, and `multi_modal_projector.linear_1/2` to the Llama's width): two layers,
  32 wide, 56-pixel input in 14-pixel patches (16 image tokens), the projector to the tiny Llama's 16, float32.
CLIP-L is the tiny long CLIP-L with OpenAI's vocabulary that HiDream's demo writes (hidream_tiny_clip_l).
Same seed -> byte-identical files (no metadata)."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.hunyuan_video import HunyuanVideoConfig, HunyuanVideoNetwork
from nodes.output_claims import write_atomic

SEED = 39
T2V_FILE = "diffusion_models/hunyuan_video_t2v_tiny.safetensors"
I2V_FILE = "diffusion_models/hunyuan_video_i2v_tiny.safetensors"
LLAMA_FILE = "text_encoders/llava_llama3_tiny.safetensors"
VISION_FILE = "clip_vision/llava_llama3_vision_tiny.safetensors"
CLIP_L_FILE = "text_encoders/hidream_tiny_clip_l.safetensors"
LLAMA_VOCAB, LLAMA_WIDTH, LLAMA_LAYERS, LLAMA_KV = 128320, 16, 4, 8
CLIP_WIDTH = 32


def tiny_config(in_channels: int, guidance: bool) -> HunyuanVideoConfig:
    return HunyuanVideoConfig(
        in_channels=in_channels,
        out_channels=16,
        hidden=128,
        heads=1,
        depth=1,
        depth_single=1,
        patch=(1, 2, 2),
        context_dim=LLAMA_WIDTH,
        vec_in_dim=CLIP_WIDTH,
        guidance_embed=guidance,
    )


def tiny_dit(in_channels: int, guidance: bool, seed: int) -> dict[str, torch.Tensor]:
    """The DiT's weights in bfloat16; every tensor random (no zero modulation or gate)."""
    torch.manual_seed(seed)
    network = HunyuanVideoNetwork(tiny_config(in_channels, guidance))
    with torch.no_grad():
        for p in network.parameters():  # larger than PyTorch's defaults, so that every block moves the output
            p.mul_(2.0)
    randomize_constants(network, torch.Generator().manual_seed(seed + 1))
    return {k: v.to(torch.bfloat16).contiguous() for k, v in network.state_dict().items()}


def tiny_llama(seed: int = SEED) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)

    def rand(*shape, scale=None):
        scale = scale if scale is not None else shape[-1] ** -0.5
        return (torch.randn(*shape, generator=gen) * scale).contiguous()

    d, ff = LLAMA_WIDTH, 2 * LLAMA_WIDTH
    sd = {"model.embed_tokens.weight": rand(LLAMA_VOCAB, d, scale=1.0)}
    for i in range(LLAMA_LAYERS):
        p = f"model.layers.{i}."
        sd[p + "self_attn.q_proj.weight"] = rand(d, d)
        sd[p + "self_attn.k_proj.weight"] = rand(LLAMA_KV, d)
        sd[p + "self_attn.v_proj.weight"] = rand(LLAMA_KV, d)
        sd[p + "self_attn.o_proj.weight"] = rand(d, d)
        sd[p + "mlp.gate_proj.weight"] = rand(ff, d)
        sd[p + "mlp.up_proj.weight"] = rand(ff, d)
        sd[p + "mlp.down_proj.weight"] = rand(d, ff)
        sd[p + "input_layernorm.weight"] = 1.0 + 0.1 * rand(d, scale=1.0)
        sd[p + "post_attention_layernorm.weight"] = 1.0 + 0.1 * rand(d, scale=1.0)
    sd["model.norm.weight"] = 1.0 + 0.1 * rand(d, scale=1.0)
    return sd


def tiny_llava_vision(seed: int = SEED + 4) -> dict[str, torch.Tensor]:
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    torch.manual_seed(seed)
    cfg = CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=16,
        image_size=56,
        patch_size=14,
        projection_dim=32,
        hidden_act="quick_gelu",
    )
    sd = {k: v for k, v in CLIPVisionModelWithProjection(cfg).state_dict().items() if not k.endswith("position_ids")}
    gen = torch.Generator().manual_seed(seed + 1)
    for name, shape in (("linear_1", (LLAMA_WIDTH, 32)), ("linear_2", (LLAMA_WIDTH, LLAMA_WIDTH))):
        sd[f"multi_modal_projector.{name}.weight"] = torch.randn(*shape, generator=gen) * shape[1] ** -0.5
        sd[f"multi_modal_projector.{name}.bias"] = torch.randn(shape[0], generator=gen) * 0.1
    return {k: v.contiguous() for k, v in sd.items()}


def build_demo_hunyuan_video(models_dir: Path) -> list[Path]:
    out = []
    for rel, make in (
        (T2V_FILE, lambda: tiny_dit(16, True, SEED)),
        (I2V_FILE, lambda: tiny_dit(33, False, SEED + 2)),
        (LLAMA_FILE, tiny_llama),
        (VISION_FILE, tiny_llava_vision),
    ):
        path = Path(models_dir) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        sd = make()
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, str(tmp)))
        out.append(path)
    return out
