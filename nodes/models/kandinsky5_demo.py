"""kandinsky5-tiny: a deterministic tiny Kandinsky 5 Lite video DiT in the published layout (the names
kandinsky5lite_t2v_*.safetensors carry, bare) as diffusion_models/kandinsky5lite_t2v_tiny.safetensors, and the
image DiT (kandinsky5lite_t2i's layout) as diffusion_models/kandinsky5lite_t2i_tiny.safetensors.

Its sizes are those ComfyUI 0.10.0's detection reads whole from a width other than 4096 / 2560 / 1792: rotary axes
(16, 24, 24), so heads 64 wide (two, 128 wide); the video input of 16 latent, 16 image-latent and 1 mask channels
per 1x2x2 patch (132). The text widths are the tiny encoders': the tiny Qwen2.5-VL's 32 and flux-tiny's CLIP-L 32
(ComfyUI fixes 3584 and 768; its recorder gives them from the file). Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.kandinsky5 import Kandinsky5Config, Kandinsky5Network
from nodes.output_claims import write_atomic

SEED = 5
T2V_FILE = "diffusion_models/kandinsky5lite_t2v_tiny.safetensors"
T2I_FILE = "diffusion_models/kandinsky5lite_t2i_tiny.safetensors"
TINY = Kandinsky5Config(
    model_dim=128,
    ff_dim=256,
    time_dim=32,
    in_text_dim=32,
    in_text_dim2=32,
    visual_embed_dim=33,
    out_visual_dim=16,
    num_text_blocks=1,
    num_visual_blocks=2,
    axes_dims=(16, 24, 24),
    rope_scale_factor=(1.0, 2.0, 2.0),
)


def tiny_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    """The tiny video DiT's weights under the published names; every tensor random (no zero modulation)."""
    torch.manual_seed(seed)
    network = Kandinsky5Network(TINY)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in network.parameters():  # larger than PyTorch's defaults, so that every block moves the output
            p.mul_(2.0)
    randomize_constants(network, gen)
    return {k: v.contiguous() for k, v in network.state_dict().items()}


# The image model at the one width ComfyUI reads as Kandinsky5Image (2560, on 16 Flux channels), otherwise as small as it
# goes: one visual block (its self- and cross-attention are 2560 square: ComfyUI's detection needs the block's
# cross-attention key norm), no text block. 54M parameters, 108 MB in bfloat16 (the published dtype), written in
# under a second: the largest demo file, but the only one ComfyUI detects as the image model.
IMAGE_TEST = Kandinsky5Config(
    model_dim=2560,
    ff_dim=32,
    time_dim=32,
    in_text_dim=32,
    in_text_dim2=32,
    visual_embed_dim=16,
    out_visual_dim=16,
    num_text_blocks=0,
    num_visual_blocks=1,
    axes_dims=(32, 48, 48),
    rope_scale_factor=(1.0, 1.0, 1.0),
)


def write_image_test_file(path: Path, seed: int = SEED) -> Path:
    """A deterministic Kandinsky 5 image DiT (IMAGE_TEST's sizes, bfloat16) at `path`; same seed -> same bytes."""
    torch.manual_seed(seed)
    network = Kandinsky5Network(IMAGE_TEST)
    randomize_constants(network, torch.Generator().manual_seed(seed + 1))
    sd = {k: v.to(torch.bfloat16).contiguous() for k, v in network.state_dict().items()}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lambda tmp: save_file(sd, str(tmp)))
    return path


def build_demo_kandinsky5(models_dir: Path) -> list[Path]:
    """The video DiT and the image DiT (the image_kandinsky5_t2i template's) under diffusion_models/."""
    path = Path(models_dir) / T2V_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lambda tmp: save_file(tiny_state_dict(), str(tmp)))
    return [path, write_image_test_file(Path(models_dir) / T2I_FILE)]
