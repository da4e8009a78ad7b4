"""hidream-tiny: a deterministic tiny HiDream written in the layout its authors publish (HiDream's own names,
bare, as Comfy-Org's hidream_i1_*.safetensors: `double_stream_blocks.N.block.attn1.to_q`,
`single_stream_blocks.N.block.ff_i.experts.M.w1`, `caption_projection.N.linear`, ...) as
diffusion_models/hidream_i1_tiny.safetensors: 2 double and 2 single MoE blocks (4 experts, 2 active) of 2 heads
32 wide, over the tiny CLIP-L and CLIP-G (pooled 32 + 48) and T5-XXL (4096 wide) of sd3-tiny, written again
under HiDream's names (text_encoders/hidream_tiny_clip_l|clip_g|t5xxl.safetensors), and a tiny Llama 3.1 with the
real 128,256-token vocabulary, 32 wide and 4 layers deep (its 4 hidden states feed the 4 blocks) as
text_encoders/llama_3.1_8b_instruct_tiny.safetensors. The VAE is Flux's (vae/flux-tiny-ae.safetensors).
Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.flux_configs import METADATA_KEY
from nodes.models.flux_demo import CONFIG_NAME as T5_CONFIG
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
    "caption_channels": [4096, LLAMA["hidden"]],
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


def tiny_hidream_state_dicts(seed: int = SEED) -> dict[str, dict[str, torch.Tensor]]:
    from diffusers import HiDreamImageTransformer2DModel

    from nodes.models.sd3_demo import tiny_sd3_state_dicts

    torch.manual_seed(seed)
    network = HiDreamImageTransformer2DModel(**CONFIG)
    randomize_constants(network, torch.Generator().manual_seed(seed + 1))
    sd3 = tiny_sd3_state_dicts()
    llama = {"model." + k: v.contiguous() for k, v in tiny_llama(seed).state_dict().items()}
    files = {FILE: {k: v.contiguous() for k, v in network.state_dict().items()}, LLAMA_FILE: llama}
    files.update({CLIP_FILES[name]: sd3[name] for name in CLIP_FILES})
    return files


def build_demo_hidream(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write hidream-tiny's files under a ComfyUI models folder; returns the paths written."""
    written = []
    with torch.random.fork_rng(devices=[]):  # the builders seed torch's global generator
        sds = tiny_hidream_state_dicts(seed)
    for name, sd in sds.items():
        path = Path(models_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {METADATA_KEY: T5_CONFIG} if name == CLIP_FILES["t5xxl"] else None  # the tiny T5's own vocabulary
        write_atomic(path, lambda tmp, sd=sd, meta=meta: save_file(sd, tmp, metadata=meta))
        written.append(path)
    return written
