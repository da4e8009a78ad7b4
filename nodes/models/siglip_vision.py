"""SigLIP vision encoders as ComfyUI loads them from models/clip_vision (comfy.clip_vision with the
siglip_vision_model configs): the image tower of SigLIP so400m, patch 14 at 384 pixels
(sigclip_vision_patch14_384.safetensors, the one Flux Redux and USO read), and its patch 16 / 512 sibling.

The key layout is ComfyUI's: its loader tells these files by `vision_model.encoder.layers.*` with a 1152-wide
layer norm and 729 (384 px) or 1024 (512 px) position embeddings, and fills its CLIP vision module built as
SigLIP (`vision_model.embeddings.patch_embedding.{weight,bias}`, `...position_embedding.weight`, the encoder
layers under transformers' CLIP names, `vision_model.post_layernorm`); other tensors in a file (SigLIP's
attention-pooling `vision_model.head.*`) are ignored there and here. Here a file is told by that layout
alone (a biased patch embedding, no class token), whatever its width and depth, so tiny files load too.

What cannot be read from the tensors comes from ComfyUI's two SigLIP configs: 16 attention heads, the
tanh GELU, layer norms with epsilon 1e-5 (ComfyUI's default, not SigLIP's 1e-6), mean and std of 0.5, and
the input size (384 for 27x27 patches of 14, 512 for 32x32 of 16: 384 is not a multiple of 14, so the size
is a table, not a product). As ComfyUI keeps them, the weights are float16 (computed in float32) except
the final layer norm, which ComfyUI builds in float32.

Outputs as ComfyUI's ClipVisionModel gives them for SigLIP: last_hidden_state after the final layer norm,
image_embeds the same tensor (SigLIP has no projection or class token here), penultimate_hidden_states the
second-to-last layer's output and all_hidden_states every layer's output [B, layers, tokens, width]."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from .clip_vision import preprocess
from .errors import ModelLoadError

PREFIX = "vision_model."
HEADS = 16
LAYER_NORM_EPS = 1e-5
MEAN = STD = (0.5, 0.5, 0.5)
# (patch size, patches per side) -> input size, from ComfyUI's clip_vision_siglip_384 / _512 configs
IMAGE_SIZES = {(14, 27): 384, (16, 32): 512}
IGNORED = ("vision_model.head.", "vision_model.embeddings.position_ids")
KEPT_FLOAT32 = ("post_layernorm.",)  # ComfyUI builds it without the float16 dtype


def is_siglip_vision(keys) -> bool:
    """A SigLIP image tower in ComfyUI's clip_vision layout: a biased patch embedding and no class token."""
    keys = set(keys)
    return (
        f"{PREFIX}embeddings.patch_embedding.bias" in keys
        and f"{PREFIX}encoder.layers.0.layer_norm1.weight" in keys
        and f"{PREFIX}post_layernorm.weight" in keys
        and f"{PREFIX}embeddings.class_embedding" not in keys
    )


@dataclass(frozen=True)
class SiglipVisionSizes:
    width: int
    mlp: int
    layers: int
    patch: int
    side: int  # patches per side
    image_size: int


def siglip_sizes(sd: dict[str, torch.Tensor], path: str | None = None) -> SiglipVisionSizes:
    width, _, patch, _ = sd[f"{PREFIX}embeddings.patch_embedding.weight"].shape
    positions = sd[f"{PREFIX}embeddings.position_embedding.weight"].shape[0]
    side = math.isqrt(positions)
    image_size = IMAGE_SIZES.get((patch, side)) if side * side == positions else None
    if image_size is None:
        known = ", ".join(f"{s * s} positions of patch {p} ({size} px)" for (p, s), size in IMAGE_SIZES.items())
        raise ModelLoadError(
            path, f"unexpected SigLIP vision layout: {positions} positions of patch {patch} (known: {known})"
        )
    if width % HEADS:
        raise ModelLoadError(path, f"unexpected SigLIP vision width {width} (not a multiple of {HEADS} heads)")
    layers = sum(1 for k in sd if k.startswith(f"{PREFIX}encoder.layers.") and k.endswith(".layer_norm1.weight"))
    if layers < 2:
        raise ModelLoadError(path, f"a SigLIP vision model needs 2 layers or more (a penultimate one), not {layers}")
    mlp = sd[f"{PREFIX}encoder.layers.0.mlp.fc1.weight"].shape[0]
    return SiglipVisionSizes(width, mlp, layers, patch, side, image_size)


class SiglipAttention(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(width, width) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = (p(x).view(b, n, HEADS, d // HEADS).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return self.out_proj(out.transpose(1, 2).reshape(b, n, d))


class SiglipMLP(nn.Module):
    def __init__(self, width: int, mlp: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(width, mlp), nn.Linear(mlp, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.nn.functional.gelu(self.fc1(x), approximate="tanh"))


class SiglipLayer(nn.Module):
    def __init__(self, width: int, mlp: int) -> None:
        super().__init__()
        self.layer_norm1 = nn.LayerNorm(width, eps=LAYER_NORM_EPS)
        self.self_attn = SiglipAttention(width)
        self.layer_norm2 = nn.LayerNorm(width, eps=LAYER_NORM_EPS)
        self.mlp = SiglipMLP(width, mlp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.layer_norm1(x))
        return x + self.mlp(self.layer_norm2(x))


class SiglipEmbeddings(nn.Module):
    def __init__(self, sizes: SiglipVisionSizes) -> None:
        super().__init__()
        self.patch_embedding = nn.Conv2d(3, sizes.width, sizes.patch, stride=sizes.patch)
        self.position_embedding = nn.Embedding(sizes.side**2, sizes.width)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.patch_embedding(pixels).flatten(2).transpose(1, 2) + self.position_embedding.weight


class SiglipEncoder(nn.Module):
    def __init__(self, sizes: SiglipVisionSizes) -> None:
        super().__init__()
        self.layers = nn.ModuleList(SiglipLayer(sizes.width, sizes.mlp) for _ in range(sizes.layers))


class SiglipVisionTower(nn.Module):
    """The tower under ComfyUI's key names (less `vision_model.`): no pre-norm, no class token."""

    def __init__(self, sizes: SiglipVisionSizes) -> None:
        super().__init__()
        self.embeddings = SiglipEmbeddings(sizes)
        self.encoder = SiglipEncoder(sizes)
        self.post_layernorm = nn.LayerNorm(sizes.width, eps=LAYER_NORM_EPS)

    def forward(self, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(final-normed tokens [B,N,D], every layer's output [B,L,N,D])."""
        x = self.embeddings(pixels)
        every = []
        for layer in self.encoder.layers:
            x = layer(x)
            every.append(x)
        return self.post_layernorm(x), torch.stack(every, dim=1)


@dataclass
class SiglipVisionEncoder:
    module: SiglipVisionTower
    image_size: int

    def encode(self, image: torch.Tensor, crop: bool) -> dict[str, torch.Tensor]:
        """ComfyUI's CLIP_VISION_OUTPUT tensors for a SigLIP tower (see the module docstring)."""
        device = next(self.module.parameters()).device
        pixels = preprocess(image.to(device), self.image_size, crop, MEAN, STD).float()
        with torch.no_grad():
            last, every = self.module(pixels)
        return {
            "last_hidden_state": last,
            "image_embeds": last,
            "penultimate_hidden_states": every[:, -2],
            "all_hidden_states": every,
        }


def load_siglip_vision(sd: dict[str, torch.Tensor], path: str | None = None) -> SiglipVisionEncoder:
    from .safetensors_io import build_module

    sizes = siglip_sizes(sd, path)
    tower = {}
    for key, t in sd.items():
        if not key.startswith(PREFIX) or key.startswith(IGNORED):
            continue  # ComfyUI loads with strict=False and drops what its module does not have
        name = key[len(PREFIX) :]
        rounded = t.is_floating_point() and not name.startswith(KEPT_FLOAT32)
        tower[name] = t.to(torch.float16) if rounded else t
    module = build_module(lambda: SiglipVisionTower(sizes), tower, path, "SigLIP vision model")
    return SiglipVisionEncoder(module, sizes.image_size)
