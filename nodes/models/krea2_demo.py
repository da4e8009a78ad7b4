"""krea2-tiny: a deterministic tiny Krea 2 transformer written in the layout Comfy-Org/Krea-2 publishes (Krea's own
names: `first.`, `tmlp.`, `tproj.1.`, `txtmlp.`, `txtfusion.`, `blocks.N.attn.wq/wk/wv/wo/gate`, `.mod.lin` as one
flattened six-row vector, `last.`), as diffusion_models/krea2_turbo_tiny.safetensors: 2 blocks of 2 heads 16 wide
(grouped query: 1 key/value head), text fusion over 3 tapped layers 32 wide; and its text encoder as
text_encoders/qwen3vl_4b_tiny.safetensors: a Qwen3-VL (`model.language_model.*`, `model.visual.*`) with the real
151,936-token vocabulary, 32 wide and 9 layers deep, so that Krea 2's taps (every third layer from 2) are 3.
The VAE is Qwen-Image's (vae/qwen_image_vae_tiny.safetensors, nodes.models.qwen_image_demo). A rank-4 LoRA on every
block's attention and MLP projections, as loras/krea2_style_reference_tiny.safetensors (the style-reference template's
LoRA): PEFT's lora_A / lora_B under `diffusion_model.` and Krea's own names, as ai-toolkit writes Krea 2 LoRAs and
ComfyUI's loader maps them (no alpha: scale 1).
Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import Krea2Transformer2DModel
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.krea2 import to_diffusers_layout
from nodes.output_claims import write_atomic

SEED = 2
FILE = "diffusion_models/krea2_turbo_tiny.safetensors"
TEXT_FILE = "text_encoders/qwen3vl_4b_tiny.safetensors"
LORA_FILE = "loras/krea2_style_reference_tiny.safetensors"
LORA_LAYERS = ("attn.wq", "attn.wk", "attn.wv", "attn.gate", "attn.wo", "mlp.gate", "mlp.up", "mlp.down")
TEXT_LAYERS = 9
CONFIG = {
    "in_channels": 64,
    "num_layers": 2,
    "attention_head_dim": 16,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "intermediate_size": 48,
    "timestep_embed_dim": 32,
    "text_hidden_dim": 32,
    "num_text_layers": 3,
    "text_num_attention_heads": 2,
    "text_num_key_value_heads": 2,
    "text_intermediate_size": 48,
    "num_layerwise_text_blocks": 2,
    "num_refiner_text_blocks": 2,
    "axes_dims_rope": (4, 6, 6),
}
# diffusers' name -> Krea's, the inverse of diffusers' convert_krea2_transformer_checkpoint_to_diffusers.
_PREFIXES = {
    "img_in.": "first.",
    "time_embed.linear_1.": "tmlp.0.",
    "time_embed.linear_2.": "tmlp.2.",
    "time_mod_proj.": "tproj.1.",
    "txt_in.norm.weight": "txtmlp.0.scale",
    "txt_in.linear_1.": "txtmlp.1.",
    "txt_in.linear_2.": "txtmlp.3.",
    "text_fusion.": "txtfusion.",
    "transformer_blocks.": "blocks.",
    "final_layer.linear.": "last.linear.",
    "final_layer.norm.weight": "last.norm.scale",
    "final_layer.scale_shift_table": "last.modulation.lin",
}
_INNER = {
    ".attn.to_q.": ".attn.wq.",
    ".attn.to_k.": ".attn.wk.",
    ".attn.to_v.": ".attn.wv.",
    ".attn.to_out.0.": ".attn.wo.",
    ".attn.to_gate.": ".attn.gate.",
    ".attn.norm_q.weight": ".attn.qknorm.qnorm.scale",
    ".attn.norm_k.weight": ".attn.qknorm.knorm.scale",
    ".ff.": ".mlp.",
    ".norm1.weight": ".prenorm.scale",
    ".norm2.weight": ".postnorm.scale",
    ".scale_shift_table": ".mod.lin",
}


def to_published(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Krea2Transformer2DModel tensors -> the published file's; nodes.models.krea2 must map them back."""
    out = {}
    for key, value in sd.items():
        new = key
        for old, repl in _PREFIXES.items():
            if new.startswith(old):
                new = repl + new[len(old) :]
                break
        for old, repl in _INNER.items():
            new = new.replace(old, repl)
        if new.startswith("blocks.") and new.endswith(".mod.lin"):
            value = value.reshape(-1)  # the file keeps each block's six modulation rows flattened
        out[new] = value.contiguous()
    back = to_diffusers_layout(dict(out))
    if back.keys() != sd.keys() or any(back[k].shape != sd[k].shape for k in sd):
        raise AssertionError("the Krea 2 layout does not convert back")
    return out


def tiny_transformer() -> Krea2Transformer2DModel:
    gen = torch.Generator().manual_seed(SEED)
    torch.manual_seed(SEED)
    model = Krea2Transformer2DModel(**CONFIG)
    randomize_constants(model, gen)  # zero-initialised norms and tables would hide a swapped name
    return model.eval()


def tiny_text_encoder() -> torch.nn.Module:
    """Qwen3-VL with the 4B's proportions shrunk (grouped-query heads, tied vocabulary size)."""
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    cfg = Qwen3VLConfig(
        text_config={
            "vocab_size": 151_936,
            "hidden_size": CONFIG["text_hidden_dim"],
            "intermediate_size": 64,
            "num_hidden_layers": TEXT_LAYERS,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 16,
            "rope_parameters": {"rope_type": "default", "rope_theta": 5_000_000.0},
        },
        vision_config={
            "depth": 1,
            "hidden_size": 64,
            "intermediate_size": 32,
            "num_heads": 16,  # ComfyUI's fixed count for Qwen3-VL towers (TextEncodeQwenImageEditPlus reads it)
            "out_hidden_size": CONFIG["text_hidden_dim"],
            "deepstack_visual_indexes": [0],
            "num_position_embeddings": 64,
        },
    )
    gen = torch.Generator().manual_seed(SEED + 1)
    torch.manual_seed(SEED + 1)
    model = Qwen3VLForConditionalGeneration(cfg)
    randomize_constants(model, gen)
    return model.eval()


def tiny_lora(published: dict[str, torch.Tensor], seed: int = SEED + 2, rank: int = 4) -> dict[str, torch.Tensor]:
    """A rank-`rank` LoRA on every block's LORA_LAYERS of the tiny transformer `published` (its file's names)."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    blocks = sorted({int(k.split(".")[1]) for k in published if k.startswith("blocks.")})
    for block in blocks:
        for layer in LORA_LAYERS:
            rows, cols = published[f"blocks.{block}.{layer}.weight"].shape
            name = f"diffusion_model.blocks.{block}.{layer}"
            out[f"{name}.lora_A.weight"] = (0.1 * torch.randn(rank, cols, generator=gen)).contiguous()
            out[f"{name}.lora_B.weight"] = (0.1 * torch.randn(rows, rank, generator=gen)).contiguous()
    return out


def build_demo_krea2(models_dir: str | Path) -> list[Path]:
    """Write the tiny Krea 2 transformer, text encoder and LoRA under models_dir; returns the paths written."""
    with torch.random.fork_rng(devices=[]):
        published = to_published({k: v.detach() for k, v in tiny_transformer().state_dict().items()})
        sds = {
            FILE: published,
            # the 4B ties its head to the embedding; no encoder reads it
            TEXT_FILE: {
                k: v.detach().contiguous() for k, v in tiny_text_encoder().state_dict().items() if k != "lm_head.weight"
            },
            LORA_FILE: tiny_lora(published),
        }
    written = []
    for name, sd in sds.items():
        path = Path(models_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, str(tmp), metadata={"format": "pt"}))
        written.append(path)
    return written
