"""Qwen2.5-VL's vision tower as ComfyUI's Qwen-Image-Edit text encoder uses it (TextEncodeQwenImageEdit and
TextEncodeQwenImageEditPlus): the `visual.*` tensors of a qwen_2.5_vl_7b text-encoder file, run on
transformers' Qwen2_5_VisionTransformerPretrainedModel.

How ComfyUI (0.3.64 to 0.10.0) treats an image, and so how this module does:
- only the batch's first image is read; it is resized (bilinear, no antialias) to whole 28-pixel cells
  (round to nearest, clamped to 3,136..12,845,056 pixels), normalised with CLIP's mean and std, and cut
  into 14-pixel patches, each repeated over the two temporal slots;
- the tower's sizes are fixed in ComfyUI except those a file's shapes give: heads are 80 wide (16 of them in
  the released 1280-wide tower), full attention at blocks 7, 15, 23 and 31, 112-pixel windows elsewhere;
- the merged tokens come out in the windows' order: ComfyUI does not undo the window permutation that
  transformers undoes (`pooler_output`), so the merger runs here on the unpermuted states;
- in the language model the image's tokens take Qwen2.5-VL's 3-axis positions (t, row, column) from the
  image's start, the text after it resuming past the larger side of the merged grid.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import (
    Qwen2_5_VLVisionConfig,
)
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import (
    Qwen2_5_VisionTransformerPretrainedModel,
)

from nodes.models.flux_keys import count_blocks, strip_prefix
from nodes.models.safetensors_io import build_module

PREFIX = "visual."
MARKER = "visual.patch_embed.proj.weight"
HEAD_WIDTH = 80  # ComfyUI: 1280 wide, 16 heads
FULL_ATTENTION_BLOCKS = (7, 15, 23, 31)
WINDOW = 112
MERGE = 2
MIN_PIXELS, MAX_PIXELS = 3136, 12_845_056
MEAN = (0.48145466, 0.4578275, 0.40821073)
STD = (0.26862954, 0.26130258, 0.27577711)
IMAGE_PAD_ID = 151655  # <|image_pad|>: the token an image's embeddings replace


def has_vision_tower(state_dict: Mapping[str, torch.Tensor]) -> bool:
    return any(k.endswith(MARKER) for k in state_dict)


def vision_config(sd: Mapping[str, torch.Tensor]) -> Qwen2_5_VLVisionConfig:
    """The tower's config from its unprefixed tensors' shapes."""
    hidden, _, temporal, patch, _ = sd["patch_embed.proj.weight"].shape
    if hidden % HEAD_WIDTH:
        raise ValueError(f"vision width {hidden} is not whole 80-wide heads")
    return Qwen2_5_VLVisionConfig(
        depth=count_blocks(sd, "blocks"),
        hidden_size=hidden,
        intermediate_size=sd["blocks.0.mlp.gate_proj.weight"].shape[0],
        num_heads=hidden // HEAD_WIDTH,
        patch_size=patch,
        temporal_patch_size=temporal,
        spatial_merge_size=MERGE,
        window_size=WINDOW,
        out_hidden_size=sd["merger.mlp.2.weight"].shape[0],
        fullatt_block_indexes=list(FULL_ATTENTION_BLOCKS),
        attn_implementation="sdpa",
    )


def build_vision_tower(
    state_dict: Mapping[str, torch.Tensor], path: str | None
) -> Qwen2_5_VisionTransformerPretrainedModel:
    """The tower from a text-encoder file's `visual.*` tensors (any prefix before `visual.`)."""
    prefix = next(k[: -len(MARKER)] for k in state_dict if k.endswith(MARKER)) + PREFIX
    sd = strip_prefix(state_dict, prefix)
    config = vision_config(sd)

    def factory() -> Qwen2_5_VisionTransformerPretrainedModel:
        model = Qwen2_5_VisionTransformerPretrainedModel(config)
        with torch.device("cpu"):  # the rotary frequencies are computed, not stored
            model.rotary_pos_emb = type(model.rotary_pos_emb)(config)
        return model

    return build_module(factory, sd, path, "Qwen2.5-VL vision tower")


def patches(image: torch.Tensor, patch: int = 14, temporal: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """(flattened patches [N, 3*temporal*patch*patch], grid [[1, h, w]]) of an IMAGE's first picture."""
    img = image[0, :, :, :3].movedim(-1, 0).float()
    height, width = img.shape[1:]
    cell = patch * MERGE
    h, w = round(height / cell) * cell, round(width / cell) * cell
    if h * w > MAX_PIXELS:
        beta = math.sqrt(height * width / MAX_PIXELS)
        h, w = max(cell, math.floor(height / beta / cell) * cell), max(cell, math.floor(width / beta / cell) * cell)
    elif h * w < MIN_PIXELS:
        beta = math.sqrt(MIN_PIXELS / (height * width))
        h, w = math.ceil(height * beta / cell) * cell, math.ceil(width * beta / cell) * cell
    img = F.interpolate(img[None], size=(h, w), mode="bilinear", align_corners=False)[0]
    # Channel by channel with Python floats, as ComfyUI rounds it.
    img = torch.stack([(img[c] - MEAN[c]) / STD[c] for c in range(3)])
    gh, gw = h // patch, w // patch
    x = img[None].repeat(temporal, 1, 1, 1)
    x = x.reshape(1, temporal, 3, gh // MERGE, MERGE, patch, gw // MERGE, MERGE, patch)
    x = x.permute(0, 3, 6, 4, 7, 2, 1, 5, 8).reshape(gh * gw, 3 * temporal * patch * patch)
    return x, torch.tensor([[1, gh, gw]])


@torch.no_grad()
def image_embeddings(
    tower: Qwen2_5_VisionTransformerPretrainedModel, image: torch.Tensor
) -> tuple[torch.Tensor, tuple[int, int, int]]:
    """The merged image tokens [N, text width] in ComfyUI's (windowed) order, and the patch grid (t, h, w)."""
    device = next(tower.parameters()).device
    cfg = tower.config
    x, grid = patches(image, cfg.patch_size, cfg.temporal_patch_size)
    states = tower(x.to(device), grid.to(device)).last_hidden_state
    return tower.merger(states).float(), tuple(int(v) for v in grid[0])


def mrope_positions(length: int, images: Sequence[tuple[int, int, tuple[int, int, int]]]) -> torch.Tensor:
    """[3, 1, length] positions: text counts on all three axes; each image (start, size, grid) takes t = its
    start, rows and columns counted from it; the text after it resumes past the larger merged side."""
    pos = torch.arange(length, dtype=torch.float32).repeat(3, 1)
    offset = 0
    for start, size, (_, gh, gw) in images:
        cols, side = gw // MERGE, max(gh, gw) // MERGE
        end, base = start + size, start + offset
        pos[:, end:] = torch.arange(base + side, base + side + length - end, dtype=torch.float32)
        idx = torch.arange(size)
        pos[0, start:end] = base
        pos[1, start:end] = base + (idx // cols).float()
        pos[2, start:end] = base + (idx % cols).float()
        offset += side - size
    return pos[:, None, :]


__all__ = ["IMAGE_PAD_ID", "build_vision_tower", "has_vision_tower", "image_embeddings", "mrope_positions", "patches"]
