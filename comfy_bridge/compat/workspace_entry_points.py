"""The files that make a workspace look like a ComfyUI install to the tools users run on one.

comfy-cli accepts a folder as a ComfyUI workspace when it holds four of main.py, nodes.py, comfy/,
comfy_extras/ and comfy_api/; ComfyUI-Manager's cm-cli (which `comfy node install` runs) appends that
folder to sys.path and imports `folder_paths` and `utils.extra_config` from it, then installs packs into
`folder_paths.get_folder_paths("custom_nodes")`. So each workspace gets, beside its ComfyUI folders:

- main.py: `python main.py --listen` in the workspace starts Comfy Cluster on it, as ComfyUI's does;
- folder_paths.py, comfy/, comfy_extras/, comfy_api/: forwarders to our compat modules, bound to this
  workspace when a tool or script imports them outside the server;
- utils/extra_config.py: ComfyUI's load_extra_path_config, on this workspace.

Each file carries ENTRY_POINT_MARK so that `compat.install()` knows them for ours (it leaves real modules
of ComfyUI's names alone) and so that they are rewritten, never a user's file of the same name.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from nodes.workspace import Workspace, activate, has_active_workspace

ENTRY_POINT_MARK = "comfy-cluster workspace entry point"

_FORWARD = '''"""ComfyUI's `{name}` for tools and scripts run on this Comfy Cluster workspace ({mark})."""
from comfy_bridge.compat.workspace_entry_points import forward
forward(__name__, __file__)
'''
_MAIN = '''"""`python main.py --listen` starts Comfy Cluster on this workspace, with ComfyUI's flags ({mark})."""
import sys

from comfy_bridge.compat.workspace_entry_points import load_extra_path_config, run_main

if __name__ == "__main__":
    sys.exit(run_main(__file__, sys.argv[1:]))
'''
_EXTRA_CONFIG = '''"""ComfyUI's utils.extra_config on this Comfy Cluster workspace ({mark})."""
from comfy_bridge.compat.workspace_entry_points import load_extra_path_config
'''
FILES = {
    "main.py": _MAIN,
    "folder_paths.py": _FORWARD.replace("{name}", "folder_paths"),
    "comfy/__init__.py": _FORWARD.replace("{name}", "comfy"),
    "comfy_extras/__init__.py": _FORWARD.replace("{name}", "comfy_extras"),
    "comfy_api/__init__.py": _FORWARD.replace("{name}", "comfy_api"),
    "utils/__init__.py": '"""ComfyUI\'s utils package ({mark})."""\n',
    "utils/extra_config.py": _EXTRA_CONFIG,
}


def is_entry_point(path: str | Path | None) -> bool:
    """Whether `path` is one of the files write_entry_points writes."""
    try:
        with open(path, encoding="utf-8") as f:
            return ENTRY_POINT_MARK in f.readline()
    except (OSError, TypeError, UnicodeDecodeError):
        return False


def _ours_or_absent(root: Path, relative: str) -> bool:
    """A top-level entry (main.py, or a package folder) that exists and is not ours is the user's: a real
    ComfyUI folder used as the workspace keeps its comfy/ (which has no __init__.py) and utils/ untouched."""
    top = root / relative.split("/")[0]
    if not top.exists():
        return True
    return is_entry_point(top / "__init__.py" if top.is_dir() else top)


def write_entry_points(root: Path) -> None:
    """Write the entry points into the workspace `root`, leaving any file or folder of that name that is
    not ours. Not in the project's own checkout, whose main.py and packages are the real ones."""
    if (root / "comfy_bridge" / "compat" / Path(__file__).name).is_file():
        return
    for relative, template in FILES.items():
        path = root / relative
        if not _ours_or_absent(root, relative):
            continue
        text = template.format(mark=ENTRY_POINT_MARK)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")


def _bind(entry_file: str, depth: int) -> None:
    """Outside the server (no workspace active yet), the workspace is the folder holding the entry point,
    and the pip runs of the tool that imported it (cm-cli installing a pack's requirements) get the torch
    pins the server's own installs have."""
    if not has_active_workspace():
        activate(Workspace(Path(entry_file).resolve().parents[depth]).create())
        from comfy_bridge.packs.pip_guard import guard_pack_installs_at_runtime

        guard_pack_installs_at_runtime()
    from comfy_bridge.compat import install

    install()


def forward(name: str, entry_file: str) -> None:
    """Make `import name` give our compat module of that name, bound to the entry point's workspace."""
    _bind(entry_file, depth=0 if name == "folder_paths" else 1)
    sys.modules[name] = importlib.import_module(f"comfy_bridge.compat.{name}")


def load_extra_path_config(yaml_path: str) -> None:
    """ComfyUI's load_extra_path_config: add the folders an extra_model_paths.yaml names to the workspace."""
    from nodes.workspace import active

    active().load_extra_model_paths(Path(yaml_path))


def run_main(main_file: str, argv: list[str]) -> int:
    """The workspace's main.py: `serve` on that workspace unless the flags name another."""
    from comfy_bridge.cli import main

    if not any(a.startswith(("--base-directory", "--workspace")) for a in argv):
        argv = ["--workspace", str(Path(main_file).resolve().parent), *argv]
    return main(["serve", *argv])
