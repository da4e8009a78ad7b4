"""`python main.py --listen` as in ComfyUI: starts Comfy Cluster's server with ComfyUI's flags.

Like ComfyUI, the folder of this file is the default base directory (models/, input/, output/ ...)."""

import sys
from pathlib import Path

from comfy_bridge.cli import main


def load_extra_path_config(yaml_path: str) -> None:
    """ComfyUI's main.load_extra_path_config: add the model folders an extra_model_paths.yaml names to the
    active workspace (packs and scripts call it with a path)."""
    from nodes.workspace import active

    active().load_extra_model_paths(Path(yaml_path))


if __name__ == "__main__":
    argv = sys.argv[1:]
    if not any(a.startswith(("--base-directory", "--workspace")) for a in argv):
        argv = ["--base-directory", str(Path(__file__).resolve().parent)] + argv
    sys.exit(main(["serve"] + argv))
