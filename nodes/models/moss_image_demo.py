"""moss-image-tiny: a deterministic tiny MOSS-Image transformer in ComfyUI's single-file layout (Comfy-Org/
MOSS-Image's diffusion_models/moss_image_*: bare official names with each joint block's q/k/v fused into
`layers.N.proj.qkv`, bf16 like moss_image_base_bf16.safetensors) as diffusion_models/moss_image_tiny.safetensors:
23 joint blocks (the template's skip-layer guidance skips block 22) of 2 heads 16 wide, an FFN 48 wide, 2 text
blocks over text states 16 wide, the width of the tiny Qwen3.5 (nodes.models.qwen35_demo), which the templates
load both as the text encoder (CLIPLoader type moss_image) and as the prompt enhancer. The VAE is FLUX.2's
(vae/flux2-klein-tiny-vae.safetensors). Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.moss_image import MossImageTransformer
from nodes.output_claims import write_atomic

SEED = 38
FILE = "diffusion_models/moss_image_tiny.safetensors"
CONFIG = {
    "dim": 32,
    "ffn_dim": 48,
    "num_heads": 2,
    "num_layers": 23,
    "text_dim": 16,
    "text_blocks": 2,
    "freq_dim": 32,
    "latent_channels": 128,
}


def tiny_state_dict() -> dict[str, torch.Tensor]:
    """The tiny transformer's weights in ComfyUI's names, bf16. Every tensor is a seeded normal draw scaled by
    1/sqrt(fan-in) (norm scales around 1), so the modulation, gates and every block change the output."""
    model = MossImageTransformer(**CONFIG)
    g = torch.Generator().manual_seed(SEED)
    sd = {}
    for name, t in model.state_dict().items():
        noise = torch.randn(t.shape, generator=g)
        if "norm" in name.split(".")[-2]:  # norm1/2, q_norm/k_norm, final_norm_video
            sd[name] = 1.0 + 0.1 * noise
        else:
            sd[name] = noise / (t.shape[-1] ** 0.5 if t.dim() == 2 else 4.0)
    return {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()}


def build_demo_moss_image(models_dir: str | Path) -> list[Path]:
    """Write the tiny MOSS-Image transformer under models_dir; returns the path written."""
    path = Path(models_dir) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lambda tmp: save_file(tiny_state_dict(), str(tmp), metadata={"format": "pt"}))
    return [path]
