"""Textual-inversion embeddings found and read as ComfyUI's comfy.sd1_clip does (load_embed and its
helpers): packs such as ComfyUI_ExtraModels' T5 tokenizer call these in the server process to turn an
"embedding:name" in a prompt into a (tokens, width) tensor.

File formats, in the order they are tried: safetensors; a torch pickle (weights only); a bare zip of
torch storages (old A1111 .pt files torch.load refuses), read as raw float32 rows."""

from __future__ import annotations

import logging
import os
import zipfile
from collections.abc import Iterable
from typing import Any

import torch

log = logging.getLogger(__name__)

EMBED_EXTENSIONS = (".safetensors", ".pt", ".bin")
SD1_WIDTH, SD2_WIDTH = 768, 1024


def expand_directory_list(directories: Iterable[str]) -> list[str]:
    """Each directory and every directory below it (symlinks followed), each once."""
    found: dict[str, None] = {}
    for top in directories:
        found[top] = None
        for root, _dirs, _files in os.walk(top, followlinks=True):
            found[root] = None
    return list(found)


def safe_load_embed_zip(embed_path: str) -> torch.Tensor | None:
    """The embedding in a zip of raw torch storages: the last "data/" entry holding at least one
    768-wide row; rows are 768 wide when the count divides, else 1024 (SD2)."""
    with zipfile.ZipFile(embed_path) as archive:
        for name in reversed([n for n in archive.namelist() if "data/" in n]):
            data = archive.read(name)
            floats = len(data) // 4
            if floats < SD1_WIDTH:
                continue
            width = SD1_WIDTH if floats % SD1_WIDTH == 0 else SD2_WIDTH
            return torch.frombuffer(bytearray(data), dtype=torch.float32).reshape(floats // width, width)
    return None


def _find_embed(name: str, directories: list[str]) -> str | None:
    """The file for `name` in the first directory holding it (exact name, then with an extension);
    names that climb out of a directory ("../x") are not looked up there."""
    for directory in directories:
        base = os.path.abspath(directory)
        path = os.path.abspath(os.path.join(directory, name))
        try:
            if os.path.commonpath((base, path)) != base:
                continue
        except ValueError:  # different drives on Windows
            continue
        for candidate in (path, *(path + ext for ext in EMBED_EXTENSIONS)):
            if os.path.isfile(candidate):
                return candidate
    return None


def _bundled(embed: dict[str, torch.Tensor], suffix: str) -> torch.Tensor | None:
    """Embeddings bundled in a LoRA file ("bundle_emb.<name><suffix>"), concatenated."""
    parts = [v for k, v in embed.items() if k.startswith("bundle_emb.") and k.endswith(suffix)]
    return torch.cat(parts, dim=0) if parts else None


def _pick(embed: Any, embedding_size: int, embed_key: str | None) -> torch.Tensor:
    """The embedding tensor in a loaded file, by the layouts ComfyUI knows."""
    if isinstance(embed, list):  # one dict per vector set: keep the tensors of the encoder's width
        rows = [t.reshape(-1, t.shape[-1]) for d in embed for t in d.values() if t.shape[-1] == embedding_size]
        return torch.cat(rows, dim=0)
    if "string_to_param" in embed:  # A1111 textual inversion
        return next(iter(embed["string_to_param"].values()))
    if embed_key is not None and embed_key in embed:  # SDXL style: {"clip_l": ..., "clip_g": ...}
        return embed[embed_key]
    for suffix in (".string_to_param.*", f".{embed_key}"):
        bundled = _bundled(embed, suffix)
        if bundled is not None:
            return bundled
    return next(iter(embed.values()))


def load_embed(
    embedding_name: str, embedding_directory: str | Iterable[str], embedding_size: int, embed_key: str | None = None
) -> torch.Tensor | None:
    """The (tokens, width) embedding called `embedding_name`, or None when no file has it or it cannot be
    read (logged, as ComfyUI skips such an embedding and encodes the prompt without it)."""
    directories = [embedding_directory] if isinstance(embedding_directory, str) else list(embedding_directory)
    path = _find_embed(embedding_name, expand_directory_list(directories))
    if path is None:
        return None
    try:
        if path.lower().endswith(".safetensors"):
            import safetensors.torch

            embed = safetensors.torch.load_file(path, device="cpu")
        else:
            try:
                embed = torch.load(path, weights_only=True, map_location="cpu")
            except Exception:  # old pickles torch refuses: read the raw storages instead
                embed = safe_load_embed_zip(path)
                if embed is None:
                    raise ValueError("no float storage of at least 768 values in the file") from None
                return embed
    except Exception as e:
        log.warning("error loading embedding %s (%s), skipping it: %s", embedding_name, path, e)
        return None
    return _pick(embed, embedding_size, embed_key)
