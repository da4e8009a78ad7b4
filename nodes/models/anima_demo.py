"""anima-tiny: a deterministic tiny Anima written in the layout its authors publish (ComfyUI's names under `net.`:
`x_embedder.proj.1`, `blocks.N.self_attn.q_proj`, `blocks.N.adaln_modulation_mlp.1`, `final_layer.linear`,
`llm_adapter.blocks.N.cross_attn.q_proj`, ...) as diffusion_models/anima_tiny.safetensors: a Cosmos Predict2 DiT of
2 blocks, 2 heads 32 wide, and an LLM adapter of 2 blocks 32 wide over T5's real 32,128 token ids; and its text
encoder as text_encoders/qwen_3_06b_base_tiny.safetensors: a Qwen3 with the real 151,936-token vocabulary, 32 wide
and 2 layers deep, whose metadata says it stands in for the 0.6B (its width cannot). The VAE is Qwen-Image's
(vae/qwen_image_vae_tiny.safetensors); a rank-4 LoRA for the DiT as loras/anima_turbo_lora_tiny.safetensors. Same
seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.anima import AnimaNetwork, to_module_layout
from nodes.models.detect import QWEN3_SIZE_METADATA
from nodes.models.flux_demo import randomize_constants
from nodes.models.zimage_demo import tiny_qwen3
from nodes.output_claims import write_atomic

SEED = 5
FILE = "diffusion_models/anima_tiny.safetensors"
TEXT_FILE = "text_encoders/qwen_3_06b_base_tiny.safetensors"
# A LoRA for it (the LLLite inpainting template's turbo LoRA stands on it): PEFT's lora_A / lora_B under ComfyUI's
# names with `diffusion_model.` (the layout diffusion-pipe, which trains Anima LoRAs, writes; ComfyUI's LoRA loader
# reads it for Anima), rank 4 on every block's attention and MLP linears. The published turbo file's own key layout
# is not checked here.
LORA_FILE = "loras/anima_turbo_lora_tiny.safetensors"
LORA_LAYERS = (
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.output_proj",
    "cross_attn.q_proj",
    "cross_attn.k_proj",
    "cross_attn.v_proj",
    "cross_attn.output_proj",
    "mlp.layer1",
    "mlp.layer2",
)
TEXT_WIDTH = 32  # zimage_demo's tiny Qwen3 width: the adapter's source width
CONFIG = {
    "dit": {
        "in_channels": 17,
        "out_channels": 16,
        "num_attention_heads": 2,
        "attention_head_dim": 32,
        "num_layers": 2,
        "mlp_ratio": 4.0,
        "text_embed_dim": 32,
        "adaln_lora_dim": 16,
        "max_size": (128, 1 << 14, 1 << 14),
        "patch_size": (1, 2, 2),
        "rope_scale": (1.0, 4.0, 4.0),
        "concat_padding_mask": False,
        "extra_pos_embed_type": None,
    },
    "adapter": {
        "vocab": 32128,
        "source_dim": TEXT_WIDTH,
        "target_dim": 32,
        "model_dim": 32,
        "num_layers": 2,
        "num_heads": 2,
        "mlp_dim": 128,
        "self_attn": True,
    },
}
# diffusers' Cosmos names -> ComfyUI's (the inverse of diffusers' Cosmos 2.0 converter, which the builder checks).
_TO_COMFY = (
    ("transformer_blocks.", "blocks."),
    ("norm1.linear_", "adaln_modulation_self_attn."),
    ("norm2.linear_", "adaln_modulation_cross_attn."),
    ("norm3.linear_", "adaln_modulation_mlp."),
    ("attn1.", "self_attn."),
    ("attn2.", "cross_attn."),
    ("to_q.", "q_proj."),
    ("to_k.", "k_proj."),
    ("to_v.", "v_proj."),
    ("to_out.0.", "output_proj."),
    ("norm_q.", "q_norm."),
    ("norm_k.", "k_norm."),
    ("ff.net.0.proj.", "mlp.layer1."),
    ("ff.net.2.", "mlp.layer2."),
    ("patch_embed.proj.", "x_embedder.proj.1."),
    ("norm_out.linear_", "final_layer.adaln_modulation."),
    ("proj_out.", "final_layer.linear."),
    ("time_embed.t_embedder.", "t_embedder.1."),
    ("time_embed.norm.", "t_embedding_norm."),
)


def comfy_names(module_sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """AnimaNetwork's state dict under ComfyUI's (the file's) names, unprefixed."""
    out = {}
    for key, value in module_sd.items():
        if key.startswith("dit."):
            key = key[len("dit.") :]
            for ours, theirs in _TO_COMFY:
                key = key.replace(ours, theirs)
        out[key] = value.contiguous()
    if set(to_module_layout(out)) != set(module_sd):
        raise AssertionError("the tiny Anima's names do not convert back to the module's")
    return out


def tiny_anima_state_dicts(seed: int = SEED) -> dict[str, dict[str, torch.Tensor]]:
    torch.manual_seed(seed)
    network = AnimaNetwork(**CONFIG)
    randomize_constants(network, torch.Generator().manual_seed(seed + 1))
    te = {"model." + k: v.contiguous() for k, v in tiny_qwen3(seed, layers=2).state_dict().items()}
    dit = {"net." + k: v for k, v in comfy_names(network.state_dict()).items()}
    return {FILE: dit, TEXT_FILE: te, LORA_FILE: tiny_lora_state_dict(dit, seed + 2)}


def tiny_lora_state_dict(dit: dict[str, torch.Tensor], seed: int, rank: int = 4) -> dict[str, torch.Tensor]:
    """A rank-`rank` LoRA (lora_A, lora_B) on every block's LORA_LAYERS of the tiny DiT `dit` (its file's names)."""
    generator = torch.Generator().manual_seed(seed)
    out = {}
    blocks = sorted({int(k.split(".")[2]) for k in dit if k.startswith("net.blocks.")})
    for block in blocks:
        for layer in LORA_LAYERS:
            rows, cols = dit[f"net.blocks.{block}.{layer}.weight"].shape
            name = f"diffusion_model.blocks.{block}.{layer}"
            out[f"{name}.lora_A.weight"] = (0.1 * torch.randn(rank, cols, generator=generator)).contiguous()
            out[f"{name}.lora_B.weight"] = (0.1 * torch.randn(rows, rank, generator=generator)).contiguous()
    return out


def build_demo_anima(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write anima-tiny's files under a ComfyUI models folder; returns the paths written."""
    written = []
    with torch.random.fork_rng(devices=[]):  # the builders seed torch's global generator
        sds = tiny_anima_state_dicts(seed)
    for name, sd in sds.items():
        path = Path(models_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {QWEN3_SIZE_METADATA: "0.6b"} if name == TEXT_FILE else None
        write_atomic(path, lambda tmp, sd=sd, meta=meta: save_file(sd, tmp, metadata=meta))
        written.append(path)
    return written
