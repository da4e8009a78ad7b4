"""USO's style projector (ByteDance USO, `uso-flux1-projector-v1.safetensors` in models/model_patches), as
ComfyUI's ModelPatchLoader loads it (comfy_extras/nodes_model_patch.py, 0.3.64): three SigLIP layers' tokens
(the 20th and 11th from last and the penultimate) each become a few style tokens in FLUX.1's hidden width,
which USOStyleReference puts before the text tokens after the model's text-input layer.

The file's keys, under `feature_embedder.`: per level (low, mid, high) `{level}_embedding_linear.0` (a linear
map over the token axis, SigLIP's 729 tokens to the style tokens, then SiLU), `{level}_layer_norm` (over the
SigLIP width, epsilon 1e-5) and `{level}_projection` (SigLIP width to the transformer's). The sizes are read
from the tensors, so tiny files in that layout load. As in ComfyUI, the projector runs in its file's dtype."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from .errors import ModelLoadError

PREFIX = "feature_embedder."
LEVELS = ("low", "mid", "high")  # the encoded image's order: layers -20, -11, penultimate


class UsoStyleLevel(nn.Module):
    def __init__(self, tokens: int, style_tokens: int, width: int, hidden: int) -> None:
        super().__init__()
        self.embedding_linear = nn.Sequential(nn.Linear(tokens, style_tokens), nn.SiLU())
        self.layer_norm = nn.LayerNorm(width, eps=1e-5)
        self.projection = nn.Linear(width, hidden)

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        mixed = self.embedding_linear(states.transpose(1, 2)).transpose(1, 2)
        return self.projection(self.layer_norm(mixed))


class UsoStyleProjector(nn.Module):
    def __init__(self, tokens: int, style_tokens: int, width: int, hidden: int) -> None:
        super().__init__()
        self.levels = nn.ModuleDict({level: UsoStyleLevel(tokens, style_tokens, width, hidden) for level in LEVELS})

    def forward(self, encoded: torch.Tensor) -> torch.Tensor:
        """encoded [3, B, tokens, width] (low, mid, high) -> style tokens [B, 3 x style tokens, hidden], the high
        level's first, in the projector's dtype."""
        dtype = next(self.parameters()).dtype
        low, mid, high = (self.levels[level](encoded[i].to(dtype)) for i, level in enumerate(LEVELS))
        return torch.cat((high, mid, low), dim=1)


def to_module_names(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The file's `feature_embedder.{level}_{part}` keys as this module's `levels.{level}.{part}`."""
    out = {}
    for key, t in sd.items():
        if not key.startswith(PREFIX):
            continue
        level, _, rest = key[len(PREFIX) :].partition("_")
        out[f"levels.{level}.{rest}"] = t
    return out


PARTS = ("embedding_linear.0.weight", "embedding_linear.0.bias", "layer_norm.weight", "layer_norm.bias")
PARTS += ("projection.weight", "projection.bias")


def refuse_reason(shapes: Mapping[str, tuple[int, ...]]) -> str | None:
    """Why a file with these tensor shapes is no USO style projector this module builds, or None."""
    missing = [
        f"{PREFIX}{level}_{part}" for level in LEVELS for part in PARTS if f"{PREFIX}{level}_{part}" not in shapes
    ]
    if missing:
        return f"is an incomplete USO style projector ({len(missing)} tensors missing, e.g. {missing[0]})"
    for level in LEVELS:
        if tuple(shapes[f"{PREFIX}{level}_embedding_linear.0.weight"]) != tuple(
            shapes[f"{PREFIX}high_embedding_linear.0.weight"]
        ) or tuple(shapes[f"{PREFIX}{level}_projection.weight"]) != tuple(shapes[f"{PREFIX}high_projection.weight"]):
            return f"is a USO style projector whose {level} level has other sizes than its high level"
    return None


def build_uso_projector(sd: Mapping[str, torch.Tensor], path: str | None = None) -> UsoStyleProjector:
    from .safetensors_io import build_module

    try:
        style_tokens, tokens = sd[f"{PREFIX}high_embedding_linear.0.weight"].shape
        hidden, width = sd[f"{PREFIX}high_projection.weight"].shape
    except KeyError as e:
        raise ModelLoadError(path, f"not a USO style projector: {e} is missing") from None
    dtype = sd[f"{PREFIX}high_projection.weight"].dtype
    return build_module(
        lambda: UsoStyleProjector(tokens, style_tokens, width, hidden),
        to_module_names(sd),
        path,
        "USO style projector",
        dtype=dtype,
    )
