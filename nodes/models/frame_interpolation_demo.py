"""The frame interpolation files of demo-models, seeded and byte-deterministic:

- frame_interpolation/film_net_fp16.safetensors: the frame interpolation template's file (Comfy-Org/frame_interpolation
  on Hugging Face), in the layout ComfyUI's loader reads (its FILMNet's parameter names). ComfyUI builds exactly
  that one FILM size, so the stand-in has the full size (34M parameters, float16: 68 MB).
- frame_interpolation/rife_v4.26_tiny.safetensors: a RIFE 4.2x at tiny widths, in the layout of Practical-RIFE's
  training checkpoints (flownet.pkl: `module.` + `blockN.`), which ComfyUI's loader renames, and whose widths it
  reads from the shapes (head 4 channels, blocks 16 wide)."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from .frame_interp_film import Film
from .frame_interp_rife import Rife

FILM_FILE = "frame_interpolation/film_net_fp16.safetensors"
RIFE_FILE = "frame_interpolation/rife_v4.26_tiny.safetensors"
RIFE_TINY = (4, (16, 16, 16, 16, 16))


def _seeded(layout: dict[str, torch.Tensor], seed: int) -> dict[str, torch.Tensor]:
    """Normal weights scaled by 1/sqrt(fan-in), small biases, ResConv scales at one; float16."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for key, value in layout.items():
        if key.endswith(".beta"):
            out[key] = torch.ones(value.shape)
        elif value.dim() == 1:
            out[key] = torch.randn(value.shape, generator=gen) * 0.02
        else:
            out[key] = torch.randn(value.shape, generator=gen) / value[0].numel() ** 0.5
    return {k: v.half().contiguous() for k, v in out.items()}


def demo_film_state_dict(seed: int = 0) -> dict[str, torch.Tensor]:
    with torch.device("meta"):
        layout = Film().state_dict()
    return _seeded(layout, seed)


def _raw_name(key: str) -> str:
    """ComfyUI's name as Practical-RIFE's checkpoint has it: `module.` + (blocks.N.rest -> blockN.rest)."""
    return "module." + ("block" + key[len("blocks.") :] if key.startswith("blocks.") else key)


def demo_rife_state_dict(seed: int = 1) -> dict[str, torch.Tensor]:
    """The tiny RIFE in Practical-RIFE's checkpoint names."""
    with torch.device("meta"):
        layout = Rife(*RIFE_TINY).state_dict()
    return {_raw_name(k): v for k, v in _seeded(layout, seed).items()}


def build_demo_frame_interpolation(models_dir: Path) -> list[Path]:
    written = []
    for name, sd in ((FILM_FILE, demo_film_state_dict()), (RIFE_FILE, demo_rife_state_dict())):
        path = Path(models_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file(sd, path)
        written.append(path)
    return written
