"""`folder_paths`: ComfyUI's folder API as a view over the active workspace (nodes.workspace)."""
from __future__ import annotations

import mimetypes
import os
import time
from pathlib import Path
from typing import Any

from nodes import output_claims
from nodes import workspace as _ws
from nodes.safe_paths import UnsafePath, safe_join
from nodes.workspace import FOLDER_ALIASES, MODEL_EXTENSIONS

supported_pt_extensions = set(MODEL_EXTENSIONS)
SUPPORTED_PT_EXTENSIONS = supported_pt_extensions
filename_list_cache: dict = {}


class _CacheHelper:
    """ComfyUI caches file lists inside `with cache_helper:`; listings here are cheap, so it is a no-op."""

    def __enter__(self) -> "_CacheHelper":
        return self

    def __exit__(self, *exc: object) -> None:
        pass


cache_helper = _CacheHelper()


def _active() -> _ws.Workspace:
    return _ws.active()


def __getattr__(name: str) -> Any:
    # Module attributes that follow the active workspace.
    ws = _active()
    if name == "base_path":
        return str(ws.root)
    if name == "models_dir":
        return str(ws.models_dir)
    if name in ("output_directory", "input_directory", "temp_directory", "user_directory"):
        return str(getattr(ws, name.replace("directory", "dir")))
    if name == "folder_names_and_paths":
        from nodes.workspace import FOLDER_EXTENSIONS
        return {key: ([str(p) for p in paths], set(FOLDER_EXTENSIONS.get(key, MODEL_EXTENSIONS)))
                for key, paths in ws.folders.items()}
    raise AttributeError(name)


def map_legacy(folder_name: str) -> str:
    return FOLDER_ALIASES.get(folder_name, folder_name)


def get_folder_paths(folder_name: str) -> list[str]:
    return [str(p) for p in _active().folder_paths(folder_name)]


def add_model_folder_path(folder_name: str, full_folder_path: str, is_default: bool = False) -> None:
    _active().add_folder_path(folder_name, full_folder_path, is_default)


def get_filename_list(folder_name: str) -> list[str]:
    return _active().list_files(folder_name)


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


def set_output_directory(path: str) -> None:
    _active().output_dir = Path(path).resolve()


def set_input_directory(path: str) -> None:
    _active().input_dir = Path(path).resolve()


def set_temp_directory(path: str) -> None:
    _active().temp_dir = Path(path).resolve()


def set_user_directory(path: str) -> None:
    _active().user_dir = Path(path).resolve()


def get_directory_by_type(type_name: str) -> str | None:
    return {"output": get_output_directory, "temp": get_temp_directory,
            "input": get_input_directory}.get(type_name, lambda: None)()


def annotated_filepath(name: str) -> tuple[str, str | None]:
    """"x.png [output]" -> ("x.png", output dir); plain names -> (name, None)."""
    for suffix, getter in ((" [output]", get_output_directory), (" [input]", get_input_directory),
                           (" [temp]", get_temp_directory)):
        if name.endswith(suffix):
            return name[:-len(suffix)], getter()
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
        kind = "model" if ext in (".gltf", ".glb", ".obj", ".fbx", ".stl") else \
            (mimetypes.guess_type(f, strict=False)[0] or "").split("/")[0]
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


def get_save_image_path(filename_prefix: str, output_dir: str, image_width: int = 0, image_height: int = 0
                        ) -> tuple[str, str, int, str, str]:
    """(full_output_folder, filename, counter, subfolder, filename_prefix) with ComfyUI's counter rule."""
    def substitute(text: str) -> str:
        if "%" not in text:
            return text
        now = time.localtime()
        for key, value in (("%width%", str(image_width)), ("%height%", str(image_height)),
                           ("%year%", str(now.tm_year)), ("%month%", f"{now.tm_mon:02}"), ("%day%", f"{now.tm_mday:02}"),
                           ("%hour%", f"{now.tm_hour:02}"), ("%minute%", f"{now.tm_min:02}"),
                           ("%second%", f"{now.tm_sec:02}")):
            text = text.replace(key, value)
        return text

    filename_prefix = substitute(filename_prefix)
    subfolder = os.path.dirname(os.path.normpath(filename_prefix))
    filename = os.path.basename(os.path.normpath(filename_prefix))
    full_output_folder = os.path.join(output_dir, subfolder)
    if os.path.commonpath((os.path.abspath(output_dir), os.path.abspath(full_output_folder))) != os.path.abspath(output_dir):
        raise Exception("**** ERROR: Saving image outside the output folder is not allowed."
                        f"\n full_output_folder: {os.path.abspath(full_output_folder)}"
                        f"\n         output_dir: {output_dir}"
                        f"\n         commonpath: {os.path.commonpath((output_dir, os.path.abspath(full_output_folder)))}")
    os.makedirs(full_output_folder, exist_ok=True)
    prefix_len = len(filename)
    counter = 1
    for existing in os.listdir(full_output_folder):
        stem = existing[:prefix_len + 1]
        if os.path.normcase(stem[:-1]) == os.path.normcase(filename) and stem[-1:] == "_":
            digits = existing[prefix_len + 1:].split("_")[0]
            if digits.isdigit():
                counter = max(counter, int(digits) + 1)
    # a re-run of this prompt (its head was killed) writes over the names the dead run took
    taken = output_claims.claim(full_output_folder, filename, counter)
    if taken.folder != full_output_folder:   # the dead run's, from a prefix with time variables
        subfolder = os.path.relpath(taken.folder, output_dir)
    return taken.folder, taken.stem, taken.counter, subfolder, filename_prefix
