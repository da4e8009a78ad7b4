"""The workspace a command acts on, from its flags (`--workspace`, ComfyUI's `--base-directory` and
directory flags, `--extra-model-paths-config`)."""
from __future__ import annotations

import argparse
from pathlib import Path

from nodes.workspace import Workspace, activate, default_workspace


def open_workspace(args: argparse.Namespace) -> Workspace:
    """The workspace the flags describe (ComfyUI's directory flags override its subfolders)."""
    root = getattr(args, "workspace", None) or getattr(args, "base_directory", None) or default_workspace()
    ws = Workspace(Path(root),
                   output_dir=getattr(args, "output_directory", None),
                   input_dir=getattr(args, "input_directory", None),
                   temp_dir=getattr(args, "temp_directory", None),
                   user_dir=getattr(args, "user_directory", None)).create()
    for group in getattr(args, "extra_model_paths_config", None) or []:
        for config in group:
            ws.load_extra_model_paths(Path(config))
    return activate(ws)
