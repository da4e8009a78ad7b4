"""alibaba-pai's Z-Image-Turbo Fun ControlNet Union (a models/model_patches file, Z-Image-Turbo-Fun-Controlnet-
Union.safetensors): a stack of Z-Image transformer blocks fed the VAE-encoded control image, whose outputs are added
to the image tokens of some of Z-Image's own blocks.

The published file's keys (the layout ComfyUI's ModelPatchLoader converts, comfy_extras/nodes_model_patch.py at
0.10.0, and diffusers' single-file Z-Image ControlNet conversion reads):
- `control_all_x_embedder.2-1.{weight,bias}`: the 2x2-patched control latent (16 channels, patch-major) to the width;
- `control_noise_refiner.{0,1}.*`: two plain Z-Image blocks that refine the embedded control tokens on their own;
- `control_layers.{k}.*` (six in the first release): Z-Image blocks with `after_proj` (the hint added to the image)
  and, on block 0, `before_proj` (mixing in the transformer's image tokens);
block parts under diffusers' names (`attention.to_q/to_k/to_v/to_out.0`, `attention.norm_q/norm_k`, `feed_forward.
w1..w3`, four RMS norms, `adaLN_modulation.0`). The 2.0/2.1 releases (fifteen control layers, refiner blocks with
projections, inpaint channels) are told apart and refused by name. Sizes come from the tensors."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

PATCH = 2
LATENT_CHANNELS = 16  # Z-Image's (Flux's) latent channels the control image is encoded to
HEAD_DIM = 128  # Z-Image's head width (the RoPE axes 32/48/48 are laid out for it)
# ComfyUI's ZImageControlPatch spreads the control layers over the released model's 30 blocks: control layer k
# acts after block k * round(30 / layers), whatever the depth of the model it patches.
RELEASED_BLOCKS = 30
V2_MARKER = "control_layers.14.adaLN_modulation.0.weight"  # the 2.x releases' fifteen control layers


def _block(dim: int, ffn: int):
    from diffusers.models.transformers.transformer_z_image import FeedForward, ZImageTransformerBlock

    block = ZImageTransformerBlock(0, dim, dim // HEAD_DIM, dim // HEAD_DIM, 1e-5, True, modulation=True)
    block.feed_forward = FeedForward(dim=dim, hidden_dim=ffn)  # the file's width (ComfyUI's rounding rule)
    return block


class ControlLayer(nn.Module):
    """A Z-Image block run on the control tokens; block 0 first adds `before_proj(control)` to the image tokens."""

    def __init__(self, dim: int, ffn: int, first: bool) -> None:
        super().__init__()
        self.block = _block(dim, ffn)
        self.before_proj = nn.Linear(dim, dim) if first else None
        self.after_proj = nn.Linear(dim, dim)

    def forward(
        self, c: torch.Tensor, x: torch.Tensor, freqs: torch.Tensor, adaln: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(hint, next control tokens)."""
        if self.before_proj is not None:
            c = self.before_proj(c) + x
        c = self.block(c, None, freqs, adaln)
        return self.after_proj(c), c


class ZImageFunControl(nn.Module):
    def __init__(self, dim: int, ffn: int, in_features: int, layers: int, refiners: int) -> None:
        super().__init__()
        self.control_all_x_embedder = nn.ModuleDict({f"{PATCH}-1": nn.Linear(in_features, dim)})
        self.control_noise_refiner = nn.ModuleList(_block(dim, ffn) for _ in range(refiners))
        self.control_layers = nn.ModuleList(ControlLayer(dim, ffn, k == 0) for k in range(layers))

    @property
    def every(self) -> int:
        """Z-Image block i gets control layer i / every's hint where that is a whole number."""
        return round(RELEASED_BLOCKS / len(self.control_layers))

    def embed(self, latent: torch.Tensor, freqs: torch.Tensor, adaln: torch.Tensor) -> torch.Tensor:
        """The control tokens of a [B,16,H,W] model-space latent (H, W even), refined by the control refiner."""
        b, c, h, w = latent.shape
        tokens = latent.view(b, c, h // PATCH, PATCH, w // PATCH, PATCH).permute(0, 2, 4, 3, 5, 1)
        tokens = self.control_all_x_embedder[f"{PATCH}-1"](tokens.flatten(3).flatten(1, 2))
        for block in self.control_noise_refiner:
            tokens = block(tokens, None, freqs[:, : tokens.shape[1]], adaln)
        return tokens

    def hints(self, control: torch.Tensor, image: torch.Tensor, freqs: torch.Tensor, adaln: torch.Tensor, blocks: int):
        """{Z-Image block index: hint} for a model of `blocks` blocks whose first block takes `image` tokens; only
        the control layers that act in such a model are run (ComfyUI runs them as the blocks reach them)."""
        n = control.shape[1]
        out, c = {}, control
        for k, layer in enumerate(self.control_layers):
            if k * self.every >= blocks:
                break
            hint, c = layer(c, image[:, :n], freqs[:, :n], adaln)
            out[k * self.every] = hint
        return out


def refuse_reason(keys) -> str | None:
    """Why a Fun ControlNet file of another layout than the first release's is not supported, or None."""
    keys = set(keys)
    if V2_MARKER in keys or "control_layers.4.adaLN_modulation.0.weight" not in keys:  # ComfyUI's own test
        return (
            "is a Z-Image Fun ControlNet 2.x file (control in the noise refiner, inpaint channels), not supported yet"
        )
    return None


def sizes(sd: Mapping[str, torch.Tensor]) -> dict[str, int]:
    """ZImageFunControl's arguments, read from a first-release state dict's shapes."""
    dim, in_features = sd[f"control_all_x_embedder.{PATCH}-1.weight"].shape
    if dim % HEAD_DIM:
        raise ValueError(f"width {dim} is not a whole number of Z-Image's {HEAD_DIM}-wide heads")
    if in_features != PATCH * PATCH * LATENT_CHANNELS:
        raise ValueError(f"the control embedder takes {in_features} features, not the 64 of a 2x2-patched latent")
    return {
        "dim": int(dim),
        "ffn": int(sd["control_layers.0.feed_forward.w1.weight"].shape[0]),
        "in_features": int(in_features),
        "layers": len({k.split(".")[1] for k in sd if k.startswith("control_layers.")}),
        "refiners": len({k.split(".")[1] for k in sd if k.startswith("control_noise_refiner.")}),
    }


def to_module_names(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The file's control-layer keys under ControlLayer's names (its block's parts sit under `block.`)."""
    out = {}
    for k, v in sd.items():
        parts = k.split(".")
        if parts[0] == "control_layers" and parts[2] not in ("before_proj", "after_proj"):
            k = ".".join([*parts[:2], "block", *parts[2:]])
        out[k] = v
    return out


def from_module_names(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """ZImageFunControl's state dict under the published file's keys (the inverse of to_module_names)."""
    return {k.replace(".block.", ".", 1) if k.startswith("control_layers.") else k: v for k, v in sd.items()}
