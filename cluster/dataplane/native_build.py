"""Compile a C++ source of native/ into a shared library on first use, cached by content hash.

No build step at install time: the system compiler (`$CXX` or g++) builds the library into a cache
directory the first time it is needed, and every later process loads the cached file. Returns
None when there is no compiler or the build fails, so callers fall back to their Python version.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

NATIVE_DIR = Path(__file__).resolve().parents[2] / "native"


def cache_dir() -> Path:
    env = os.environ.get("COMFY_CLUSTER_NATIVE_CACHE")
    base = Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "comfy-cluster"
    return base / "native"


def build(source: str) -> Path | None:
    """Path of the compiled library for native/<source>, building it if needed; None if impossible."""
    if os.environ.get("COMFY_CLUSTER_NO_NATIVE"):
        return None
    src = NATIVE_DIR / source
    compiler = shutil.which(os.environ.get("CXX", "g++"))
    if not src.is_file() or compiler is None:
        return None
    digest = hashlib.sha256(src.read_bytes()).hexdigest()[:16]
    out = cache_dir() / f"{src.stem}-{digest}.so"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    # Build to a private name and rename: concurrent first users never load a half-written file.
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=out.parent)
    os.close(fd)
    cmd = [compiler, "-O2", "-std=c++17", "-shared", "-fPIC", "-o", tmp, str(src)]
    try:
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
        os.replace(tmp, out)
    except (subprocess.SubprocessError, OSError):
        Path(tmp).unlink(missing_ok=True)
        return None
    return out


def load(source: str) -> ctypes.CDLL | None:
    path = build(source)
    if path is None:
        return None
    try:
        return ctypes.CDLL(str(path))
    except OSError:
        return None
