"""`comfy-cluster nodes install | list | disable | enable`: managing the workspace's custom node packs
the way ComfyUI-Manager does.

A pack is installed into the workspace's first custom_nodes folder (where `comfy --workspace DIR node
install` puts packs too) by copying a local folder or `.py` file, or by `git clone` of anything else.
It is assembled under a dot-name (which the loader skips), its requirements.txt is installed with the
torch family pinned (pip_guard refuses what would replace torch), and only then renamed into place, so
a refused pack leaves nothing behind; its install.py runs once it is in place (install_steps). Disabling renames an entry to `<name>.disabled`, as the Manager
does; the loader skips such entries.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from comfy_bridge.packs.install_steps import install_line_by_line, install_unlisted, run_install_script
from comfy_bridge.packs.pip_guard import RequirementsError, TorchReplacement, install_requirements
from comfy_bridge.packs.torch_companions import install_comfyui_companions, needs_companions
from nodes.workspace import Workspace

DISABLED = ".disabled"
STAGING_PREFIX = ".installing-"


class PackError(RuntimeError):
    """A pack cannot be installed, found, enabled or disabled as asked."""


@dataclass(frozen=True)
class PackEntry:
    name: str  # as the loader names it: the folder, or the .py file
    path: Path
    enabled: bool
    origin: str | None  # the git remote it was cloned from, when it is a git checkout


def install_dir(ws: Workspace) -> Path:
    """Where new packs go: the workspace's own custom_nodes (the first custom_nodes path)."""
    return ws.folder_paths("custom_nodes")[0]


def _git_origin(path: Path) -> str | None:
    if not (path / ".git").exists():
        return None
    done = subprocess.run(
        ["git", "-C", str(path), "config", "--get", "remote.origin.url"], capture_output=True, text=True
    )
    return done.stdout.strip() or None


def list_packs(ws: Workspace) -> list[PackEntry]:
    """Every pack entry of the workspace's custom_nodes folders, enabled or not, sorted by name."""
    entries = []
    for folder in ws.folder_paths("custom_nodes"):
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.name.startswith(".") or path.name == "__pycache__":
                continue
            enabled = not path.name.endswith(DISABLED)
            name = path.name if enabled else path.name[: -len(DISABLED)]
            is_pack = path.is_dir() or (path.is_file() and Path(name).suffix == ".py")
            if not is_pack:
                continue
            entries.append(PackEntry(name, path, enabled, _git_origin(path) if path.is_dir() else None))
    return sorted(entries, key=lambda e: e.name.lower())


def is_local_source(source: str) -> bool:
    """A local pack folder or .py file to copy (a bare git repository is cloned instead)."""
    path = Path(source).expanduser()
    if path.is_file():
        return path.suffix == ".py"
    is_bare_repo = (path / "HEAD").is_file() and (path / "objects").is_dir()
    return path.is_dir() and not is_bare_repo


def pack_name(source: str) -> str:
    """The entry name a source installs as: the folder or file name, or the repository name of a URL."""
    if is_local_source(source):
        return Path(source).expanduser().resolve().name
    name = source.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    return name[:-4] if name.endswith(".git") else name


def _fetch(source: str, dest: Path) -> None:
    if is_local_source(source):
        path = Path(source).expanduser()
        if path.is_dir():
            shutil.copytree(path, dest, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, dest)
        return
    done = subprocess.run(["git", "clone", "--quiet", "--recursive", source, str(dest)], capture_output=True, text=True)
    if done.returncode != 0:
        raise PackError(f"git clone {source} failed:\n{done.stderr.strip()}")


def install_pack(
    ws: Workspace,
    source: str,
    requirements: bool = True,
    python: str = sys.executable,
    pip_args: Sequence[str] = (),
    notes: list[str] | None = None,
    install_script: bool = True,
) -> tuple[PackEntry, list[str]]:
    """Install a pack from a local path or a git URL; returns (the entry, the packages pip installed).
    A pack that uses torchvision or spandrel gets them first, matched to torch (torch_companions). Then, as
    ComfyUI-Manager: its requirements.txt (line by line when the whole file cannot be installed), what it imports
    unlisted (install_steps.UNLISTED), and after it is in place its install.py. What cannot be had is appended to
    `notes` and the install goes on.
    Raises PackError, or pip_guard's TorchReplacement (nothing is installed then)."""
    notes = notes if notes is not None else []
    name = pack_name(source)
    if not name or name.startswith("."):
        raise PackError(f"cannot tell a pack name from {source!r}")
    folder = install_dir(ws)
    folder.mkdir(parents=True, exist_ok=True)
    dest = folder / name
    if dest.exists() or (folder / (name + DISABLED)).exists():
        raise PackError(f"a pack named {name!r} is already in {folder} (disable or remove it first)")
    staging = folder / (STAGING_PREFIX + name)
    if staging.exists():  # left by an interrupted install
        shutil.rmtree(staging) if staging.is_dir() else staging.unlink()
    try:
        _fetch(source, staging)
        installed: list[str] = []
        if requirements and needs_companions(staging):
            try:
                installed += install_comfyui_companions(python, pip_args)
            except RequirementsError as err:
                notes.append(f"{err}; until then the pack's imports of torchvision or spandrel fail")
        req = staging / "requirements.txt"
        if requirements and req.is_file():
            try:
                installed += install_requirements(req, python, pip_args)
            except TorchReplacement:
                raise
            except RequirementsError:  # one unreachable line: the others still go in, as with the Manager
                installed += install_line_by_line(req, python, pip_args, notes)
        if requirements:
            installed += install_unlisted(staging, python, pip_args, notes)
        staging.rename(dest)
    finally:
        if staging.is_dir():
            shutil.rmtree(staging)
        elif staging.exists():
            staging.unlink()
    if requirements and install_script:
        run_install_script(dest, ws.root, ws.models_dir, python, notes)
    return PackEntry(name, dest, True, _git_origin(dest) if dest.is_dir() else None), installed


def _find(ws: Workspace, name: str) -> PackEntry:
    matches = [e for e in list_packs(ws) if name in (e.name, Path(e.name).stem)]
    if not matches:
        raise PackError(f"no pack named {name!r} in {', '.join(map(str, ws.folder_paths('custom_nodes')))}")
    if len(matches) > 1:
        raise PackError(f"{name!r} names several entries: {', '.join(str(e.path) for e in matches)}")
    return matches[0]


def set_enabled(ws: Workspace, name: str, enabled: bool) -> PackEntry:
    """Enable (drop the `.disabled` suffix) or disable (add it) a pack; the server loads the change on
    its next start, as ComfyUI does."""
    from comfy_bridge.packs.cluster_pack import PACK_NAME

    if name == PACK_NAME:
        raise PackError(f"{PACK_NAME} is built into Comfy Cluster and cannot be enabled or disabled")
    entry = _find(ws, name)
    if entry.enabled == enabled:
        return entry
    target = entry.path.parent / (entry.name if enabled else entry.name + DISABLED)
    if target.exists():
        raise PackError(f"cannot rename {entry.path} to {target}: it exists")
    entry.path.rename(target)
    return PackEntry(entry.name, target, enabled, entry.origin)
