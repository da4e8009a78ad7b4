"""`folder_paths`: ComfyUI's folder API over the active workspace (nodes.workspace).

`folder_names_and_paths` is the active workspace's own folder table, so what a pack writes there (a new
folder key such as GGUF's `unet_gguf`, paths, extensions) is what our loaders, /object_info and /models
read. Code acting for a tenant also finds the tenant's own model folders through get_folder_paths and
get_filename_list (comfy_bridge.tenancy); the table itself holds the operator's shared folders only.
"""

from __future__ import annotations

import mimetypes
import os
import time
from pathlib import Path
from typing import Any

from nodes import output_claims
from nodes import workspace as _ws
from nodes.safe_paths import UnsafePath, safe_join
from nodes.workspace import FOLDER_ALIASES, SUPPORTED_PT_EXTENSIONS

supported_pt_extensions = SUPPORTED_PT_EXTENSIONS  # the one set every default model folder lists
SYSTEM_USER_PREFIX = "__"
FileList = tuple[list[str], dict[str, float], float]  # (files, walked folder -> mtime, when listed)
# ComfyUI's list cache: valid while no walked folder's mtime changed and no new path appeared. Beside it,
# what each entry was listed from (paths, extensions): another tenant's paths or a pack's new extension
# make it stale too.
filename_list_cache: dict[str, FileList] = {}
_listed_from: dict[str, tuple] = {}
extension_mimetypes_cache = {"webp": "image", "fbx": "model"}


class CacheHelper:
    """Inside `with cache_helper:` a folder is listed once (ComfyUI wraps building /object_info in it)."""

    def __init__(self) -> None:
        self.cache: dict[Any, FileList] = {}
        self.active = False

    def get(self, key: Any, default: Any = None) -> Any:
        return self.cache.get(key, default) if self.active else default

    def set(self, key: Any, value: FileList) -> None:
        if self.active:
            self.cache[key] = value

    def clear(self) -> None:
        self.cache.clear()

    def __enter__(self) -> CacheHelper:
        self.active = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.active = False
        self.clear()


cache_helper = CacheHelper()


def _active() -> _ws.Workspace:
    return _ws.active()


def __getattr__(name: str) -> Any:
    # Module attributes that follow the active workspace.
    ws = _active()
    if name == "folder_names_and_paths":
        return ws.folder_names_and_paths
    if name == "base_path":
        return str(ws.root)
    if name == "models_dir":
        return str(ws.models_dir)
    if name in ("output_directory", "input_directory", "temp_directory", "user_directory"):
        return str(getattr(ws, name.replace("directory", "dir")))
    raise AttributeError(name)


def map_legacy(folder_name: str) -> str:
    return FOLDER_ALIASES.get(folder_name, folder_name)


def _known(folder_name: str) -> str:
    """The folder key; KeyError for a name no one registered, as ComfyUI raises."""
    key = map_legacy(folder_name)
    if key not in _active().folder_names_and_paths:
        raise KeyError(key)
    return key


def get_folder_paths(folder_name: str) -> list[str]:
    return [str(p) for p in _active().folder_paths(_known(folder_name))]


def add_model_folder_path(folder_name: str, full_folder_path: str, is_default: bool = False) -> None:
    _active().add_folder_path(folder_name, full_folder_path, is_default)


def _basis(key: str) -> tuple:
    ws = _active()
    return tuple(str(p) for p in ws.folder_paths(key)), frozenset(ws.folder_extensions(key))


def get_filename_list_(folder_name: str) -> FileList:
    """List folder `folder_name` now (no cache)."""
    files, walked = _active().scan_files(_known(folder_name))
    return files, walked, time.perf_counter()


def cached_filename_list_(folder_name: str) -> FileList | None:
    """The cached list of `folder_name` if it still holds, else None."""
    key = map_legacy(folder_name)
    basis = _basis(key)
    strong = cache_helper.get((key, basis))
    if strong is not None:
        return strong
    out = filename_list_cache.get(key)
    if out is None or _listed_from.get(key) != basis:
        return None
    try:
        if any(os.path.getmtime(folder) != mtime for folder, mtime in out[1].items()):
            return None
    except OSError:  # a listed folder is gone
        return None
    if any(os.path.isdir(path) and path not in out[1] for path in basis[0]):
        return None
    return out


def get_filename_list(folder_name: str) -> list[str]:
    key = _known(folder_name)
    out = cached_filename_list_(key)
    if out is None:
        out = get_filename_list_(key)
        filename_list_cache[key] = out
        _listed_from[key] = _basis(key)
    cache_helper.set((key, _listed_from.get(key)), out)
    return list(out[0])


def get_full_path(folder_name: str, filename: str) -> str | None:
    path = _active().full_path(folder_name, filename)
    return None if path is None else str(path)


def get_full_path_or_raise(folder_name: str, filename: str) -> str:
    path = get_full_path(folder_name, filename)
    if path is None:
        raise FileNotFoundError(f"Model in folder '{folder_name}' with filename '{filename}' not found.")
    return path


def get_output_directory() -> str:
    return str(_active().output_dir)


def get_input_directory() -> str:
    return str(_active().input_dir)


def get_temp_directory() -> str:
    return str(_active().temp_dir)


def get_user_directory() -> str:
    return str(_active().user_dir)


def get_system_user_directory(name: str = "system") -> str:
    """Where a tool keeps its own files under the user folder (`user/__manager` for ComfyUI-Manager): the
    name must be a plain identifier, so a caller cannot reach outside it (newer ComfyUI's function)."""
    if not name.isidentifier() or name.startswith("_"):
        raise ValueError(f"invalid system user directory name {name!r}: a plain identifier is expected")
    return str(_active().user_dir / f"__{name}")


def get_public_user_directory(user_id: str) -> str | None:
    """A user's folder for HTTP routes; None for an empty id or a system user (`__` prefix)."""
    if not user_id or not isinstance(user_id, str) or user_id.startswith(SYSTEM_USER_PREFIX):
        return None
    return os.path.join(get_user_directory(), user_id)


def is_within_directory(directory: str, target: str) -> bool:
    """Whether `target`, symlinks resolved, lies inside `directory`."""
    try:
        directory, target = os.path.realpath(directory), os.path.realpath(target)
        return os.path.commonpath((directory, target)) == directory
    except ValueError:  # a NUL byte, or another drive
        return False


def set_output_directory(path: str) -> None:
    _active().output_dir = Path(path).resolve()


def set_input_directory(path: str) -> None:
    _active().input_dir = Path(path).resolve()


def set_temp_directory(path: str) -> None:
    _active().temp_dir = Path(path).resolve()


def set_user_directory(path: str) -> None:
    _active().user_dir = Path(path).resolve()


def get_directory_by_type(type_name: str) -> str | None:
    return {"output": get_output_directory, "temp": get_temp_directory, "input": get_input_directory}.get(
        type_name, lambda: None
    )()


def annotated_filepath(name: str) -> tuple[str, str | None]:
    """ "x.png [output]" -> ("x.png", output dir); plain names -> (name, None)."""
    for suffix, getter in (
        (" [output]", get_output_directory),
        (" [input]", get_input_directory),
        (" [temp]", get_temp_directory),
    ):
        if name.endswith(suffix):
            return name[: -len(suffix)], getter()
    return name, None


def get_annotated_filepath(name: str, default_dir: str | None = None) -> str:
    """The input, output or temp file `name` refers to. UnsafePath (a ValueError) when it climbs out
    of its folder or a symlink leads out: node packs open these files for a prompt, so they obey the
    containment rule of /view (nodes.safe_paths). Model files (get_full_path) do not."""
    name, base = annotated_filepath(name)
    if base is None:
        base = default_dir if default_dir is not None else get_input_directory()
    safe_join(Path(base), name)
    # The path as joined, as ComfyUI returns it (packs display and compare it); it was checked above.
    return os.path.join(base, name)


def exists_annotated_filepath(name: str) -> bool:
    try:
        return os.path.exists(get_annotated_filepath(name))
    except UnsafePath:
        return False


def filter_files_extensions(files: list[str], extensions: Any) -> list[str]:
    extensions = {e.lower() for e in extensions}
    return sorted(f for f in files if not extensions or os.path.splitext(f)[-1].lower() in extensions)


def filter_files_content_types(files: list[str], content_types: list[str]) -> list[str]:
    """Files whose MIME major type is one of `content_types` ("image", "video", "audio", "model")."""
    out = []
    for f in files:
        ext = os.path.splitext(f)[-1].lower()
        kind = (
            "model"
            if ext in (".gltf", ".glb", ".obj", ".fbx", ".stl")
            else (mimetypes.guess_type(f, strict=False)[0] or "").split("/")[0]
        )
        if kind in content_types:
            out.append(f)
    return out


def recursive_search(directory: str, excluded_dir_names: list[str] | None = None) -> tuple[list[str], dict[str, float]]:
    if not os.path.isdir(directory):
        return [], {}
    excluded = set(excluded_dir_names or [])
    files, dirs = [], {directory: os.path.getmtime(directory)}
    for dirpath, subdirs, filenames in os.walk(directory, followlinks=True, topdown=True):
        subdirs[:] = [d for d in subdirs if d not in excluded]
        for fn in filenames:
            files.append(os.path.relpath(os.path.join(dirpath, fn), directory))
        for d in subdirs:
            path = os.path.join(dirpath, d)
            dirs[path] = os.path.getmtime(path)
    return files, dirs


def get_input_subfolders() -> list[str]:
    base = get_input_directory()
    folders = []
    for dirpath, dirnames, _ in os.walk(base):
        for d in dirnames:
            folders.append(os.path.relpath(os.path.join(dirpath, d), base).replace(os.sep, "/"))
    return sorted(folders)


def get_save_image_path(
    filename_prefix: str, output_dir: str, image_width: int = 0, image_height: int = 0
) -> tuple[str, str, int, str, str]:
    """(full_output_folder, filename, counter, subfolder, filename_prefix) with ComfyUI's counter rule."""

    def substitute(text: str) -> str:
        if "%" not in text:
            return text
        now = time.localtime()
        for key, value in (
            ("%width%", str(image_width)),
            ("%height%", str(image_height)),
            ("%year%", str(now.tm_year)),
            ("%month%", f"{now.tm_mon:02}"),
            ("%day%", f"{now.tm_mday:02}"),
            ("%hour%", f"{now.tm_hour:02}"),
            ("%minute%", f"{now.tm_min:02}"),
            ("%second%", f"{now.tm_sec:02}"),
        ):
            text = text.replace(key, value)
        return text

    filename_prefix = substitute(filename_prefix)
    subfolder = os.path.dirname(os.path.normpath(filename_prefix))
    filename = os.path.basename(os.path.normpath(filename_prefix))
    full_output_folder = os.path.join(output_dir, subfolder)
    if os.path.commonpath((os.path.abspath(output_dir), os.path.abspath(full_output_folder))) != os.path.abspath(
        output_dir
    ):
        raise Exception(
            "**** ERROR: Saving image outside the output folder is not allowed."
            f"\n full_output_folder: {os.path.abspath(full_output_folder)}"
            f"\n         output_dir: {output_dir}"
            f"\n         commonpath: {os.path.commonpath((output_dir, os.path.abspath(full_output_folder)))}"
        )
    os.makedirs(full_output_folder, exist_ok=True)
    prefix_len = len(filename)
    counter = 1
    for existing in os.listdir(full_output_folder):
        stem = existing[: prefix_len + 1]
        if os.path.normcase(stem[:-1]) == os.path.normcase(filename) and stem[-1:] == "_":
            digits = existing[prefix_len + 1 :].split("_")[0]
            if digits.isdigit():
                counter = max(counter, int(digits) + 1)
    # a re-run of this prompt (its head was killed) writes over the names the dead run took
    taken = output_claims.claim(full_output_folder, filename, counter)
    if taken.folder != full_output_folder:  # the dead run's, from a prefix with time variables
        subfolder = os.path.relpath(taken.folder, output_dir)
    return taken.folder, taken.stem, taken.counter, subfolder, filename_prefix
