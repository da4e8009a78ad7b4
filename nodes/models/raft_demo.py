"""The RAFT-large file VOID's template loads (optical_flow/raft_large_C_T_SKHT_V2-ff5fadd5.safetensors): torchvision's
RAFT-large layout with seeded weights (nodes.models.raft.demo_raft_state_dict). ComfyUI's OpticalFlowLoader builds
exactly RAFT-large, so the stand-in has its full size (5.3M parameters, float16: 10.5 MB). Byte-deterministic."""

from __future__ import annotations

from pathlib import Path

from safetensors.torch import save_file

from .raft import demo_raft_state_dict

FILE = "optical_flow/raft_large_C_T_SKHT_V2-ff5fadd5.safetensors"


def build_demo_raft(models_dir: Path) -> list[Path]:
    path = Path(models_dir) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(demo_raft_state_dict(), path)
    return [path]
