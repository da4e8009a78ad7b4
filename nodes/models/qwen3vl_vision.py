"""Qwen3-VL's vision tower (the `model.visual.*` tensors of a Qwen3-VL checkpoint: Qwen-Image 2.1's qwen3vl_8b
text encoder, MiniMax H3's qwen3vl_32b) on transformers' Qwen3VLVisionModel, and an IMAGE read as the newest
ComfyUI source reads it (comfy/text_encoders/qwen3vl.py, qwen_vl.py, qwen35.py):

- only the batch's first picture, its first three channels; resized (bilinear, no antialias) to whole 32-pixel
  cells (patch 16 x merge 2), each side rounded to the nearest; an area above 12,845,056 pixels shrinks (sides
  floored) and one below 3,136 grows (sides ceiled), aspect kept;
- normalised to [-1, 1] (mean and std 0.5 per channel), cut into 16-pixel patches repeated over the two
  temporal slots, in the 2x2-merge order the tower expects;
- the tower's sizes come from the shapes except the heads, which ComfyUI fixes at 16, and the blocks whose
  states feed the DeepStack mergers, which ComfyUI fixes per model (DEEPSTACK_BLOCKS; other depths, such as a
  tiny test tower's, take the first blocks);
- out come the merged tokens (one per 2x2 patches, the text model's width) and one DeepStack feature per
  merger; the language model adds feature i to the image tokens' states after its decoder layer i, and gives
  the image tokens Qwen-VL's 3-axis rotary positions (`mrope_positions`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLVisionConfig
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionModel

from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import count_blocks, strip_prefix
from nodes.models.qwen_vl import IMAGE_PAD_ID, mrope_positions
from nodes.models.safetensors_io import build_module

MARKER = "visual.patch_embed.proj.weight"
NUM_HEADS = 16  # ComfyUI's QWEN3VL_VISION_COMMON: no shape carries it
MERGE = 2
MIN_PIXELS, MAX_PIXELS = 3136, 12_845_056
MEAN = STD = (0.5, 0.5, 0.5)
# ComfyUI's (and the published configs') DeepStack blocks by tower depth: 27 blocks in Qwen3-VL-8B/32B, 24 in
# Qwen3-VL-2B/4B.
DEEPSTACK_BLOCKS = {27: [8, 16, 24], 24: [5, 11, 17]}


def has_vision_model(state_dict: Mapping[str, torch.Tensor]) -> bool:
    return any(k.endswith(MARKER) for k in state_dict)


def vision_config(
    sd: Mapping[str, torch.Tensor], num_heads: int = NUM_HEADS, deepstack_blocks: Sequence[int] | None = None
) -> Qwen3VLVisionConfig:
    """The tower's config from its unprefixed (`patch_embed.*`, `blocks.N.*`) tensors' shapes."""
    hidden, channels, temporal, patch, _ = sd["patch_embed.proj.weight"].shape
    if hidden % num_heads or (hidden // num_heads) % 4:
        raise ValueError(f"vision width {hidden} does not split into {num_heads} heads of a multiple of 4")
    depth = count_blocks(sd, "blocks")
    mergers = count_blocks(sd, "deepstack_merger_list")
    if deepstack_blocks is not None:
        blocks = list(deepstack_blocks)
        if len(blocks) != mergers:
            raise ValueError(f"{len(blocks)} DeepStack blocks given for the tower's {mergers} mergers")
    else:
        blocks = DEEPSTACK_BLOCKS.get(depth, [])
        blocks = blocks if len(blocks) == mergers else list(range(mergers))
    if any(not 0 <= b < depth for b in blocks):
        raise ValueError(f"DeepStack blocks {blocks} are outside the tower's {depth} blocks")
    return Qwen3VLVisionConfig(
        depth=depth,
        hidden_size=int(hidden),
        intermediate_size=int(sd["blocks.0.mlp.linear_fc1.weight"].shape[0]),
        num_heads=num_heads,
        in_channels=int(channels),
        patch_size=int(patch),
        temporal_patch_size=int(temporal),
        spatial_merge_size=MERGE,
        out_hidden_size=int(sd["merger.linear_fc2.weight"].shape[0]),
        num_position_embeddings=int(sd["pos_embed.weight"].shape[0]),
        deepstack_visual_indexes=blocks,
    )


def build_vision_model(
    state_dict: Mapping[str, torch.Tensor],
    path: str | None,
    num_heads: int = NUM_HEADS,
    deepstack_blocks: Sequence[int] | None = None,
) -> Qwen3VLVisionModel:
    """The tower from a checkpoint's `visual.*` tensors (any prefix before `visual.`, e.g. `model.`), in the
    file's dtype."""
    marker_key = next((k for k in state_dict if k.endswith(MARKER)), None)
    if marker_key is None:
        raise ModelLoadError(path, f"no Qwen3-VL vision tower ({MARKER})")
    sd = strip_prefix(state_dict, marker_key[: -len(MARKER)] + "visual.")
    try:
        config = vision_config(sd, num_heads, deepstack_blocks)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Qwen3-VL vision tower: {e}") from None

    def skeleton() -> Qwen3VLVisionModel:
        model = Qwen3VLVisionModel(config)
        with torch.device("cpu"):  # rotary frequencies are computed, not stored
            model.rotary_pos_emb = type(model.rotary_pos_emb)(config)
        return model

    return build_module(skeleton, sd, path, "Qwen3-VL vision tower", dtype=sd["patch_embed.proj.weight"].dtype)


def resized_size(height: int, width: int, cell: int = 16 * MERGE) -> tuple[int, int]:
    """(height, width) ComfyUI resizes a picture to before patching: whole cells, the area kept within
    MIN_PIXELS..MAX_PIXELS."""
    h, w = round(height / cell) * cell, round(width / cell) * cell
    if h * w > MAX_PIXELS:
        beta = math.sqrt(height * width / MAX_PIXELS)
        h, w = max(cell, math.floor(height / beta / cell) * cell), max(cell, math.floor(width / beta / cell) * cell)
    elif h * w < MIN_PIXELS:
        beta = math.sqrt(MIN_PIXELS / (height * width))
        h, w = math.ceil(height * beta / cell) * cell, math.ceil(width * beta / cell) * cell
    return h, w


def preprocess(image: torch.Tensor, patch: int = 16, temporal: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """(pixel values [N, 3*temporal*patch*patch], grid [[1, h, w]] in patches) of an IMAGE [B,H,W,C]'s first
    picture, as the tower takes them."""
    if image.ndim != 4 or image.shape[-1] < 3:
        raise ValueError(f"expected an IMAGE [B,H,W,C] with at least 3 channels, got shape {tuple(image.shape)}")
    img = image[0, :, :, :3].movedim(-1, 0).float()
    h, w = resized_size(img.shape[1], img.shape[2], patch * MERGE)
    img = F.interpolate(img[None], size=(h, w), mode="bilinear", align_corners=False)[0]
    img = torch.stack([(img[c] - MEAN[c]) / STD[c] for c in range(3)])  # per channel, Python floats
    gh, gw = h // patch, w // patch
    x = img[None].repeat(temporal, 1, 1, 1)
    x = x.reshape(1, temporal, 3, gh // MERGE, MERGE, patch, gw // MERGE, MERGE, patch)
    x = x.permute(0, 3, 6, 4, 7, 2, 1, 5, 8).reshape(gh * gw, 3 * temporal * patch * patch)
    return x, torch.tensor([[1, gh, gw]])


@dataclass(frozen=True)
class VisionEmbeddings:
    """One picture read by the tower: `embeds` [tokens, width] replace its <|image_pad|> token in the prompt,
    `deepstack[i]` [tokens, width] joins those tokens' states after language-model layer i; `grid` is the
    patch grid (t, h, w)."""

    embeds: torch.Tensor
    deepstack: tuple[torch.Tensor, ...]
    grid: tuple[int, int, int]

    @property
    def tokens(self) -> int:
        return self.embeds.shape[0]


@torch.no_grad()
def encode_image(model: Qwen3VLVisionModel, image: torch.Tensor) -> VisionEmbeddings:
    """An IMAGE's first picture through the tower (in the tower's dtype and device)."""
    cfg = model.config
    pixels, grid = preprocess(image, cfg.patch_size, cfg.temporal_patch_size)
    weight = model.patch_embed.proj.weight
    out = model(pixels.to(weight.device, weight.dtype), grid_thw=grid.to(weight.device))
    return VisionEmbeddings(out.pooler_output, tuple(out.deepstack_features), tuple(int(v) for v in grid[0]))


__all__ = [
    "IMAGE_PAD_ID",
    "VisionEmbeddings",
    "build_vision_model",
    "encode_image",
    "has_vision_model",
    "mrope_positions",
    "preprocess",
    "resized_size",
    "vision_config",
]
