"""Data that tensor shapes cannot tell: the RoPE axes of a non-standard Flux and the tokenizer of a tiny T5.

A model file names its config folder in its safetensors metadata (`comfy_cluster.config`); the folder is
shipped under nodes/models/configs/<name>/ (data, no weights). Real Flux files need none of it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from nodes.models.errors import ModelLoadError
from nodes.models.safetensors_io import read_header

CONFIGS_DIR = Path(__file__).parent / "configs"
METADATA_KEY = "comfy_cluster.config"


def file_metadata(path: str | Path) -> dict[str, str]:
    if not str(path).endswith(".safetensors"):
        return {}
    return read_header(path).metadata


def config_dir(name: str) -> Path:
    # The name comes from a file's metadata: allow only a plain folder name under CONFIGS_DIR.
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or name.startswith("."):
        raise ModelLoadError(None, f"invalid config name in model metadata: {name!r}")
    d = CONFIGS_DIR / name
    if not d.is_dir():
        raise ModelLoadError(None, f"the model's metadata names config {name!r}, but {d} does not exist")
    return d


def config_for_sources(sources: tuple[str, ...]) -> tuple[Path | None, dict[str, Any]]:
    """(config folder, its flux.json) for the first source whose metadata names one; (None, {}) if none does."""
    for src in sources:
        name = file_metadata(src).get(METADATA_KEY)
        if name:
            d = config_dir(name)
            cfg = d / "flux.json"
            return d, (json.loads(cfg.read_text()) if cfg.exists() else {})
    return None, {}
