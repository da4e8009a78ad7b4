"""The workspace a command acts on, from its flags (`--workspace`, ComfyUI's `--base-directory` and
directory flags, `--extra-model-paths-config`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from comfy_bridge.compat.workspace_entry_points import write_entry_points
from nodes.workspace import Workspace, activate, default_workspace


def open_workspace(args: argparse.Namespace) -> Workspace:
    """The workspace the flags describe (ComfyUI's directory flags override its subfolders)."""
    root = getattr(args, "workspace", None) or getattr(args, "base_directory", None) or default_workspace()
    ws = Workspace(
        Path(root),
        output_dir=getattr(args, "output_directory", None),
        input_dir=getattr(args, "input_directory", None),
        temp_dir=getattr(args, "temp_directory", None),
        user_dir=getattr(args, "user_directory", None),
    ).create()
    write_entry_points(ws.root)
    for group in getattr(args, "extra_model_paths_config", None) or []:
        for config in group:
            ws.load_extra_model_paths(Path(config))
    return activate(ws)


def describe_workspace(ws: Workspace) -> list[str]:
    """What `serve` prints at start: where the workspace is and where each kind of model is looked for, so
    a user knows where to put checkpoints (and that `main.py` and `serve` may use different folders)."""
    lines = [f"Workspace: {ws.root}", f"  input {ws.input_dir}, output {ws.output_dir}"]
    for key in (
        "checkpoints",
        "diffusion_models",
        "text_encoders",
        "vae",
        "loras",
        "controlnet",
        "upscale_models",
        "custom_nodes",
    ):
        folders = ws.folder_paths(key)
        if folders:
            lines.append(f"  {key}: " + ", ".join(str(folder) for folder in folders))
    return lines
