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
# ComfyUI's `folder_paths.supported_pt_extensions`: one set, shared by the model folders of every workspace,
# that packs extend (".gguf", ".onnx") to make every model folder list those files too.
SUPPORTED_PT_EXTENSIONS: set[str] = set(MODEL_EXTENSIONS)

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
    "latent_upscale_models": ["latent_upscale_models"],
    "hypernetworks": ["hypernetworks"],
    "photomaker": ["photomaker"],
    "classifiers": ["classifiers"],
    "model_patches": ["model_patches"],
    "audio_encoders": ["audio_encoders"],
    "background_removal": ["background_removal"],
    "frame_interpolation": ["frame_interpolation"],
    "geometry_estimation": ["geometry_estimation"],
    "optical_flow": ["optical_flow"],
    "detection": ["detection"],
}
# Legacy aliases ComfyUI keeps for node packs.
FOLDER_ALIASES = {"clip": "text_encoders", "unet": "diffusion_models", "t2i_adapter": "controlnet"}
# Folders whose files are not model weights ("folder": its subfolders are the entries; empty: every file).
FOLDER_EXTENSIONS: dict[str, frozenset[str]] = {
    "configs": frozenset({".yaml"}),
    "diffusers": frozenset({"folder"}),
    "custom_nodes": frozenset(),
}

# ComfyUI's `folder_names_and_paths`: folder key -> (its paths, the file extensions it lists). Packs read and
# write it in place (a new key, paths appended, extensions added), with any sequence and collection types.
FolderEntry = tuple[Any, Any]


def _entry_paths(entry: FolderEntry | None) -> list[str]:
    if not entry:
        return []
    paths = entry[0]
    return [paths] if isinstance(paths, (str, os.PathLike)) else [str(p) for p in paths]


def _entry_extensions(entry: FolderEntry | None) -> set[str]:
    exts = entry[1] if entry and len(entry) > 1 else ()
    return {exts} if isinstance(exts, str) else {str(e).lower() for e in exts}


def _default_folders(root: Path) -> dict[str, FolderEntry]:
    models = root / "models"
    folders: dict[str, FolderEntry] = {
        key: (
            [str(models / sub) for sub in subs],
            set(FOLDER_EXTENSIONS[key]) if key in FOLDER_EXTENSIONS else SUPPORTED_PT_EXTENSIONS,
        )
        for key, subs in MODEL_FOLDERS.items()
    }
    # beside models/, as in today's ComfyUI
    folders["custom_nodes"] = ([str(root / "custom_nodes")], set())
    folders["datasets"] = ([str(root / "datasets")], set())
    folders["fonts"] = ([str(root / "fonts")], {".ttf", ".otf"})
    return folders


# The head's workspace, as `Workspace.snapshot()` JSON, for the executor processes it starts: their ModelFns
# must read the same model folders and configs (a CLIP vocabulary in models/configs, extra_model_paths).
SNAPSHOT_ENV = "COMFY_CLUSTER_WORKSPACE_SNAPSHOT"

WORKSPACE_SUBDIRS = ("custom_nodes", "input", "output", "temp", "user")
CREATED_MODEL_DIRS = (
    "checkpoints",
    "loras",
    "vae",
    "controlnet",
    "clip",
    "text_encoders",
    "diffusion_models",
    "unet",
    "embeddings",
    "upscale_models",
    "configs",
)


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
    # The one copy of this workspace's folder table, in ComfyUI's shape (`folder_paths.folder_names_and_paths`
    # is this dict): what packs write here is what our loaders, /object_info and /models read.
    folder_names_and_paths: dict[str, FolderEntry] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()
        self.output_dir = Path(self.output_dir or self.root / "output").resolve()
        self.input_dir = Path(self.input_dir or self.root / "input").resolve()
        self.temp_dir = Path(self.temp_dir or self.root / "temp").resolve()
        self.user_dir = Path(self.user_dir or self.root / "user").resolve()
        if not self.folder_names_and_paths:
            self.folder_names_and_paths.update(_default_folders(self.root))

    @property
    def models_dir(self) -> Path:
        return self.root / "models"

    @property
    def folders(self) -> dict[str, list[Path]]:
        """Each folder key's paths (a copy: change them with add_folder_path or folder_names_and_paths)."""
        return {key: [Path(p) for p in _entry_paths(entry)] for key, entry in self.folder_names_and_paths.items()}

    def create(self) -> Workspace:
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
        return [Path(p) for p in _entry_paths(self.folder_names_and_paths.get(self.folder_key(name)))]

    def folder_extensions(self, name: str) -> set[str]:
        """The file extensions folder `name` lists (empty: every file; "folder": its subfolders)."""
        return _entry_extensions(self.folder_names_and_paths.get(self.folder_key(name)))

    def add_folder_path(self, name: str, path: str | Path, is_default: bool = False) -> None:
        """ComfyUI's add_model_folder_path: append `path` (first when `is_default`; a known path only moves
        to the front then); an unknown key becomes a folder that lists every file."""
        key, path = self.folder_key(name), str(path)
        entry = self.folder_names_and_paths.get(key)
        if entry is None:
            self.folder_names_and_paths[key] = ([path], set())
            return
        paths = entry[0]
        if not isinstance(paths, list):  # a pack stored a tuple: keep its extensions, make the paths a list
            paths = _entry_paths(entry)
            self.folder_names_and_paths[key] = (paths, entry[1])
        if path in paths:
            if is_default and paths[0] != path:
                paths.remove(path)
                paths.insert(0, path)
        elif is_default:
            paths.insert(0, path)
        else:
            paths.append(path)

    def scan_files(self, name: str) -> tuple[list[str], dict[str, float]]:
        """(relative file names with forward slashes, sorted; every folder walked -> its mtime) of folder
        `name`, as ComfyUI's file lists are built and cached. Hidden subfolders are skipped."""
        exts = self.folder_extensions(name)
        found: set[str] = set()
        walked: dict[str, float] = {}
        for base in self.folder_paths(name):
            if not base.is_dir():
                continue
            for dirpath, dirnames, filenames in os.walk(base, followlinks=True):
                dirnames[:] = [d for d in dirnames if not d.startswith(".")]
                try:
                    walked[dirpath] = os.path.getmtime(dirpath)
                except OSError:  # removed while walking
                    continue
                if "folder" in exts and Path(dirpath) == base:
                    found.update(d for d in dirnames)
                for fn in filenames:
                    if not exts or os.path.splitext(fn)[1].lower() in exts:
                        found.add(Path(dirpath, fn).relative_to(base).as_posix())
        return sorted(found), walked

    def list_files(self, name: str) -> list[str]:
        """Relative file names (forward slashes) under a model folder, sorted, as ComfyUI lists them."""
        return self.scan_files(name)[0]

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
                except OSError:  # unreadable: not this one
                    continue
        return None

    def snapshot(self) -> dict[str, Any]:
        """This workspace as plain data (its folders as resolved now), to open the same one elsewhere."""
        return {
            "root": str(self.root),
            "output_dir": str(self.output_dir),
            "input_dir": str(self.input_dir),
            "temp_dir": str(self.temp_dir),
            "user_dir": str(self.user_dir),
            "folders": {k: _entry_paths(v) for k, v in self.folder_names_and_paths.items()},
            "extensions": {k: sorted(_entry_extensions(v)) for k, v in self.folder_names_and_paths.items()},
        }

    @classmethod
    def from_snapshot(cls, data: dict[str, Any]) -> Workspace:
        extensions = data.get("extensions", {})

        def exts(key: str) -> set[str]:
            found = set(extensions.get(key, SUPPORTED_PT_EXTENSIONS))
            # the model folders keep sharing the one set packs extend
            return SUPPORTED_PT_EXTENSIONS if found == SUPPORTED_PT_EXTENSIONS else found

        folders = {k: (list(v), exts(k)) for k, v in data["folders"].items()}
        return cls(
            Path(data["root"]),
            Path(data["output_dir"]),
            Path(data["input_dir"]),
            Path(data["temp_dir"]),
            Path(data["user_dir"]),
            folders,
        )

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
