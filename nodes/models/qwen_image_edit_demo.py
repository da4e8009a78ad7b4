"""qwen-image-edit-tiny: the text encoder Qwen-Image-Edit's workflows need, as ComfyUI users have the real one:
text_encoders/qwen_2.5_vl_7b_edit_tiny.safetensors holds qwen-image-tiny's language model (`model.*`, the same
tensors) and a Qwen2.5-VL vision tower (`visual.*`, the released file's names: patch_embed.proj, blocks.N.{norm1,
norm2, attn.qkv, attn.proj, mlp.gate_proj/up_proj/down_proj}, merger.{ln_q, mlp.0, mlp.2}), bfloat16.

The tower keeps the rules ComfyUI fixes (80-wide heads, full attention at block 7, 14-pixel patches, two temporal
slots, 2x2 merging) at 160 wide (two heads) and 8 blocks, its merger giving the language model's 32-wide tokens.
Qwen-Image-Edit (2509) ships its transformer in Qwen-Image's layout, so the edit workflows use qwen-image-tiny's
transformer and VAE. loras/qwen_image_edit_tiny_lightning.safetensors stands in for the Lightning LoRA the
templates load: rank 4 on attention and MLP layers of both blocks, bare diffusers names with lora_down/lora_up/
alpha. diffusion_models/qwen_image_edit_2511_tiny.safetensors is qwen-image-tiny's transformer with the empty
`__index_timestep_zero__` tensor Qwen-Image-Edit 2511's files carry. Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import (
    Qwen2_5_VLVisionConfig,
)
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import (
    Qwen2_5_VisionTransformerPretrainedModel,
)

from nodes.models.flux_demo import randomize_constants
from nodes.models.qwen_image import TIMESTEP_ZERO_MARKER
from nodes.models.qwen_image_demo import TEXT_WIDTH, tiny_qwen_image_state_dicts
from nodes.models.qwen_vl import FULL_ATTENTION_BLOCKS, HEAD_WIDTH
from nodes.output_claims import write_atomic

SEED = 8
VISION_WIDTH, VISION_DEPTH, VISION_MLP = 2 * HEAD_WIDTH, 8, 64
FILES = {
    "text_encoder": "text_encoders/qwen_2.5_vl_7b_edit_tiny.safetensors",
    "lora": "loras/qwen_image_edit_tiny_lightning.safetensors",
    "transformer_2511": "diffusion_models/qwen_image_edit_2511_tiny.safetensors",
}
LORA_LAYERS = ("attn.to_q", "attn.add_v_proj", "img_mlp.net.0.proj", "txt_mlp.net.2")


def tiny_vision_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    """The tower's tensors under `visual.`, bfloat16."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        tower = Qwen2_5_VisionTransformerPretrainedModel(
            Qwen2_5_VLVisionConfig(
                depth=VISION_DEPTH,
                hidden_size=VISION_WIDTH,
                intermediate_size=VISION_MLP,
                num_heads=VISION_WIDTH // HEAD_WIDTH,
                out_hidden_size=TEXT_WIDTH,
                fullatt_block_indexes=list(FULL_ATTENTION_BLOCKS),
            )
        )
        randomize_constants(tower, torch.Generator().manual_seed(seed))
    return {f"visual.{k}": v.to(torch.bfloat16).contiguous() for k, v in tower.state_dict().items()}


def tiny_lora_state_dict(transformer: dict[str, torch.Tensor], seed: int = SEED) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for block in (0, 1):
        for layer in LORA_LAYERS:
            name = f"transformer_blocks.{block}.{layer}"
            rows, cols = transformer[f"{name}.weight"].shape
            out[f"{name}.lora_down.weight"] = torch.randn(4, cols, generator=gen) * 0.1
            out[f"{name}.lora_up.weight"] = torch.randn(rows, 4, generator=gen) * 0.1
            out[f"{name}.alpha"] = torch.tensor(4.0)
    return {k: v.to(torch.bfloat16) for k, v in out.items()}


def tiny_qwen_image_edit_state_dicts() -> dict[str, dict[str, torch.Tensor]]:
    base = tiny_qwen_image_state_dicts()
    return {
        "text_encoder": {**base["text_encoder"], **tiny_vision_state_dict()},
        "lora": tiny_lora_state_dict(base["transformer"]),
        "transformer_2511": {**base["transformer"], TIMESTEP_ZERO_MARKER: torch.zeros(0, dtype=torch.bfloat16)},
    }


def build_demo_qwen_image_edit(models_dir: Path) -> list[Path]:
    """Write qwen-image-edit-tiny's text encoder and LoRA under a ComfyUI models folder; returns the paths written."""
    written = []
    for name, sd in tiny_qwen_image_edit_state_dicts().items():
        path = Path(models_dir) / FILES[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp, metadata={"format": "pt"}))
        written.append(path)
    return written
