"""The ComfyUI-shaped workspace: model folders, inputs, outputs, and extra_model_paths.yaml.

One `Workspace` object is the single source of truth for where files live. The `folder_paths`
compat module that node packs import is a thin view over the active workspace.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs
import yaml

from cluster.refs import file_digest

MODEL_EXTENSIONS = frozenset({".ckpt", ".pt", ".pt2", ".bin", ".pth", ".safetensors", ".pkl", ".sft"})

# ComfyUI's folder keys -> the subfolders of models/ they read (first one is where new files go).
MODEL_FOLDERS: dict[str, list[str]] = {
    "checkpoints": ["checkpoints"],
    "configs": ["configs"],
    "loras": ["loras"],
    "vae": ["vae"],
    "text_encoders": ["text_encoders", "clip"],
    "diffusion_models": ["unet", "diffusion_models"],
    "clip_vision": ["clip_vision"],
    "style_models": ["style_models"],
    "embeddings": ["embeddings"],
    "diffusers": ["diffusers"],
    "vae_approx": ["vae_approx"],
    "controlnet": ["controlnet", "t2i_adapter"],
    "gligen": ["gligen"],
    "upscale_models": ["upscale_models"],
    "hypernetworks": ["hypernetworks"],
    "photomaker": ["photomaker"],
    "classifiers": ["classifiers"],
    "model_patches": ["model_patches"],
    "audio_encoders": ["audio_encoders"],
}
# Legacy aliases ComfyUI keeps for node packs.
FOLDER_ALIASES = {"clip": "text_encoders", "unet": "diffusion_models", "t2i_adapter": "controlnet"}
FOLDER_EXTENSIONS: dict[str, frozenset[str]] = {"configs": frozenset({".yaml"}), "diffusers": frozenset({"folder"})}

# The head's workspace, as `Workspace.snapshot()` JSON, for the executor processes it starts: their ModelFns
# must read the same model folders and configs (a CLIP vocabulary in models/configs, extra_model_paths).
SNAPSHOT_ENV = "COMFY_CLUSTER_WORKSPACE_SNAPSHOT"

WORKSPACE_SUBDIRS = ("custom_nodes", "input", "output", "temp", "user")
CREATED_MODEL_DIRS = ("checkpoints", "loras", "vae", "controlnet", "clip", "text_encoders", "diffusion_models",
                      "unet", "embeddings", "upscale_models", "configs")


def default_workspace() -> Path:
    """The workspace used when none is given: $COMFY_CLUSTER_WORKSPACE or the user's data dir."""
    env = os.environ.get("COMFY_CLUSTER_WORKSPACE")
    return Path(env) if env else Path(platformdirs.user_data_dir("comfy-cluster", appauthor=False)) / "workspace"


@dataclass
class Workspace:
    root: Path
    output_dir: Path | None = None
    input_dir: Path | None = None
    temp_dir: Path | None = None
    user_dir: Path | None = None
    folders: dict[str, list[Path]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()
        self.output_dir = Path(self.output_dir or self.root / "output").resolve()
        self.input_dir = Path(self.input_dir or self.root / "input").resolve()
        self.temp_dir = Path(self.temp_dir or self.root / "temp").resolve()
        self.user_dir = Path(self.user_dir or self.root / "user").resolve()
        if not self.folders:
            models = self.root / "models"
            self.folders = {key: [models / sub for sub in subs] for key, subs in MODEL_FOLDERS.items()}
            self.folders["custom_nodes"] = [self.root / "custom_nodes"]

    @property
    def models_dir(self) -> Path:
        return self.root / "models"

    def create(self) -> "Workspace":
        """Make the folder tree (idempotent)."""
        for sub in CREATED_MODEL_DIRS:
            (self.models_dir / sub).mkdir(parents=True, exist_ok=True)
        for sub in WORKSPACE_SUBDIRS:
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        for d in (self.output_dir, self.input_dir, self.temp_dir, self.user_dir):
            d.mkdir(parents=True, exist_ok=True)
        extra = self.root / "extra_model_paths.yaml"
        if extra.exists():
            self.load_extra_model_paths(extra)
        return self

    # -- folder_paths semantics ------------------------------------------------------------
    def folder_key(self, name: str) -> str:
        return FOLDER_ALIASES.get(name, name)

    def folder_paths(self, name: str) -> list[Path]:
        return list(self.folders.get(self.folder_key(name), []))

    def add_folder_path(self, name: str, path: str | Path, is_default: bool = False) -> None:
        paths = self.folders.setdefault(self.folder_key(name), [])
        path = Path(path)
        if path in paths:
            paths.remove(path)
        paths.insert(0, path) if is_default else paths.append(path)

    def list_files(self, name: str) -> list[str]:
        """Relative file names (forward slashes) under a model folder, sorted, as ComfyUI lists them."""
        key = self.folder_key(name)
        exts = FOLDER_EXTENSIONS.get(key, MODEL_EXTENSIONS)
        found: set[str] = set()
        for base in self.folder_paths(key):
            if not base.is_dir():
                continue
            for dirpath, dirnames, filenames in os.walk(base, followlinks=True):
                dirnames[:] = [d for d in dirnames if not d.startswith(".")]
                if "folder" in exts and Path(dirpath) == base:
                    found.update(d for d in dirnames)
                for fn in filenames:
                    if Path(fn).suffix.lower() in exts:
                        found.add(Path(dirpath, fn).relative_to(base).as_posix())
        return sorted(found)

    def full_path(self, name: str, filename: str) -> Path | None:
        """The file `filename` in folder `name`, or None. Refuses names that climb out of the folder.

        The check is on the name only, and symlinks are followed wherever they lead: users link
        model files and folders in from other disks (as extra_model_paths.yaml does), and model
        folders are the operator's, never written by a tenant. Input, output and temp files, which
        tenants do write, obey the stricter rule of nodes.safe_paths instead."""
        for base in self.folder_paths(name):
            joined = Path(os.path.normpath(base / filename))
            if not joined.is_relative_to(os.path.normpath(base)):
                return None
            if joined.exists():
                return joined.resolve()
        return None

    def find_copy(self, path: str, digest: str) -> Path | None:
        """This workspace's copy of a model file another machine (the head) names by `path`: a file under one
        of these model folders whose name within it is the tail of `path` (its file name, or with the
        subfolders above it), longest tail first, holding the content `digest` names. None if there is none."""
        parts = Path(path).parts[1:] if Path(path).is_absolute() else Path(path).parts
        roots = [root for key, paths in self.folders.items() if key != "custom_nodes" for root in paths]
        for n in range(min(len(parts), 4), 0, -1):
            tail = Path(*parts[-n:])
            for root in roots:
                candidate = root / tail
                try:
                    if candidate.exists() and file_digest(candidate) == digest:
                        return candidate.resolve()
                except OSError:   # unreadable: not this one
                    continue
        return None

    def snapshot(self) -> dict[str, Any]:
        """This workspace as plain data (its folders as resolved now), to open the same one elsewhere."""
        return {"root": str(self.root), "output_dir": str(self.output_dir), "input_dir": str(self.input_dir),
                "temp_dir": str(self.temp_dir), "user_dir": str(self.user_dir),
                "folders": {k: [str(p) for p in v] for k, v in self.folders.items()}}

    @classmethod
    def from_snapshot(cls, data: dict[str, Any]) -> "Workspace":
        return cls(Path(data["root"]), Path(data["output_dir"]), Path(data["input_dir"]), Path(data["temp_dir"]),
                   Path(data["user_dir"]), {k: [Path(p) for p in v] for k, v in data["folders"].items()})

    def load_extra_model_paths(self, config: Path) -> None:
        """Read ComfyUI's extra_model_paths.yaml: sections with base_path, is_default and folder keys."""
        data = yaml.safe_load(config.read_text()) or {}
        for section in data.values():
            if not isinstance(section, dict):
                continue
            base = Path(os.path.expandvars(os.path.expanduser(section.get("base_path", ""))))
            if not base.is_absolute():
                base = (config.parent / base).resolve()
            is_default = bool(section.get("is_default", False))
            for key, value in section.items():
                if key in ("base_path", "is_default"):
                    continue
                for line in str(value).splitlines():
                    line = line.strip()
                    if line:
                        self.add_folder_path(key, base / line, is_default=is_default)


_active: Workspace | None = None


def activate(ws: Workspace) -> Workspace:
    """Make `ws` the workspace that folder_paths and the nodes read."""
    global _active
    _active = ws
    return ws


def activate_snapshot(snapshot: dict[str, Any]) -> Workspace:
    """Activate the workspace `snapshot` describes, keeping the active one when it is that workspace
    already (an executor gets the snapshot with every pack call)."""
    if _active is None or _active.snapshot() != snapshot:
        activate(Workspace.from_snapshot(snapshot))
    return active()


def has_active_workspace() -> bool:
    """Whether a workspace was activated, or the head handed this process its own (SNAPSHOT_ENV)."""
    return _active is not None or SNAPSHOT_ENV in os.environ


def active() -> Workspace:
    """The workspace in use: the activated one; in a process the head started, the head's (SNAPSHOT_ENV);
    else the default one."""
    global _active
    if _active is None:
        snapshot = os.environ.get(SNAPSHOT_ENV)
        _active = Workspace.from_snapshot(json.loads(snapshot)) if snapshot else Workspace(default_workspace()).create()
    return _active


def child_process_env() -> dict[str, str]:
    """Environment that makes processes started from here (executors) open the active workspace."""
    return {SNAPSHOT_ENV: json.dumps(active().snapshot())}
