"""hidream-tiny: a deterministic tiny HiDream written in the layout its authors publish (HiDream's own names,
bare, as Comfy-Org's hidream_i1_*.safetensors: `double_stream_blocks.N.block.attn1.to_q`,
`single_stream_blocks.N.block.ff_i.experts.M.w1`, `caption_projection.N.linear`, ...) as
diffusion_models/hidream_i1_tiny.safetensors: 2 double and 2 single MoE blocks (4 experts, 2 active) of 2 heads
32 wide. Its text encoders keep the real vocabularies, so ComfyUI's own tokenizers read them too: a long CLIP-L
(248 positions, as clip_l_hidream) 32 wide and a CLIP-G 48 wide over CLIP's 49,408 tokens
(text_encoders/hidream_tiny_clip_l|clip_g.safetensors, HF layout), a T5 32 wide over T5's 32,128
(text_encoders/hidream_tiny_t5xxl.safetensors), and a Llama 3.1 32 wide and 4 layers deep over Llama 3's 128,256
(its 4 hidden states feed the 4 blocks; text_encoders/llama_3.1_8b_instruct_tiny.safetensors). The VAE is Flux's
(vae/flux-tiny-ae.safetensors). Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.hidream import llama_layers, rope_axes
from nodes.output_claims import write_atomic

SEED = 11
FILE = "diffusion_models/hidream_i1_tiny.safetensors"
LLAMA_FILE = "text_encoders/llama_3.1_8b_instruct_tiny.safetensors"
CLIP_FILES = {
    "clip_l": "text_encoders/hidream_tiny_clip_l.safetensors",
    "clip_g": "text_encoders/hidream_tiny_clip_g.safetensors",
    "t5xxl": "text_encoders/hidream_tiny_t5xxl.safetensors",
}
LLAMA = {"hidden": 32, "layers": 4, "heads": 2, "kv_heads": 1, "mlp": 64, "vocab": 128256}
CLIP_VOCAB, T5_VOCAB, T5_WIDTH = 49408, 32128, 32
CLIPS = {"clip_l": (32, 248, "quick_gelu"), "clip_g": (48, 77, "gelu")}  # width, positions, activation
HEAD_DIM = 32
BLOCKS = (2, 2)  # double, single
CONFIG = {
    "patch_size": 2,
    "in_channels": 16,
    "out_channels": 16,
    "num_layers": BLOCKS[0],
    "num_single_layers": BLOCKS[1],
    "attention_head_dim": HEAD_DIM,
    "num_attention_heads": 2,
    "caption_channels": [T5_WIDTH, LLAMA["hidden"]],
    "text_emb_dim": 32 + 48,
    "num_routed_experts": 4,
    "num_activated_experts": 2,
    "axes_dims_rope": rope_axes(HEAD_DIM),
    "max_resolution": (128, 128),
    "llama_layers": llama_layers(sum(BLOCKS)),
}


def tiny_llama(seed: int = SEED) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=LLAMA["vocab"],
        hidden_size=LLAMA["hidden"],
        intermediate_size=LLAMA["mlp"],
        num_hidden_layers=LLAMA["layers"],
        num_attention_heads=LLAMA["heads"],
        num_key_value_heads=LLAMA["kv_heads"],
        head_dim=LLAMA["hidden"] // LLAMA["heads"],
        rope_theta=500000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
    )
    model = LlamaModel(cfg)
    randomize_constants(model, torch.Generator().manual_seed(seed + 2))
    return model


def tiny_clip(name: str, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """A 3-layer CLIP text model with a projection, in the HF file layout (`text_model.`, `text_projection`)."""
    from transformers import CLIPTextConfig, CLIPTextModelWithProjection

    from nodes.models.clip import clip_heads

    width, positions, act = CLIPS[name]
    cfg = CLIPTextConfig(
        vocab_size=CLIP_VOCAB,
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=3,
        num_attention_heads=clip_heads(width),
        max_position_embeddings=positions,
        projection_dim=width,
        hidden_act=act,
    )
    model = CLIPTextModelWithProjection(cfg)
    randomize_constants(model, gen)
    return {k: v.contiguous() for k, v in model.state_dict().items() if not k.endswith("position_ids")}


def tiny_t5(gen: torch.Generator) -> dict[str, torch.Tensor]:
    from transformers import T5Config, T5EncoderModel

    cfg = T5Config(
        vocab_size=T5_VOCAB,
        d_model=T5_WIDTH,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        feed_forward_proj="gated-gelu",
        is_encoder_decoder=False,
        use_cache=False,
    )
    model = T5EncoderModel(cfg)
    randomize_constants(model, gen)
    return {k: v.contiguous() for k, v in model.state_dict().items() if k != "encoder.embed_tokens.weight"}


def tiny_hidream_state_dicts(seed: int = SEED) -> dict[str, dict[str, torch.Tensor]]:
    from diffusers import HiDreamImageTransformer2DModel

    torch.manual_seed(seed)
    network = HiDreamImageTransformer2DModel(**CONFIG)
    randomize_constants(network, torch.Generator().manual_seed(seed + 1))
    llama = {"model." + k: v.contiguous() for k, v in tiny_llama(seed).state_dict().items()}
    gen = torch.Generator().manual_seed(seed + 3)
    torch.manual_seed(seed + 3)
    return {
        FILE: {k: v.contiguous() for k, v in network.state_dict().items()},
        LLAMA_FILE: llama,
        CLIP_FILES["clip_l"]: tiny_clip("clip_l", gen),
        CLIP_FILES["clip_g"]: tiny_clip("clip_g", gen),
        CLIP_FILES["t5xxl"]: tiny_t5(gen),
    }


def build_demo_hidream(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write hidream-tiny's files under a ComfyUI models folder; returns the paths written."""
    written = []
    with torch.random.fork_rng(devices=[]):  # the builders seed torch's global generator
        sds = tiny_hidream_state_dicts(seed)
    for name, sd in sds.items():
        path = Path(models_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp))
        written.append(path)
    return written
