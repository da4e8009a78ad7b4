"""`python main.py --listen` as in ComfyUI: starts Comfy Cluster's server with ComfyUI's flags.

Like ComfyUI, the folder of this file is the default base directory (models/, input/, output/ ...)."""
import sys
from pathlib import Path

from comfy_bridge.cli import main

if __name__ == "__main__":
    argv = sys.argv[1:]
    if not any(a.startswith(("--base-directory", "--workspace")) for a in argv):
        argv = ["--base-directory", str(Path(__file__).resolve().parent)] + argv
    sys.exit(main(["serve"] + argv))
