"""Values that name things without carrying them: which weights (`ModelRef`)."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import blake3


@lru_cache(maxsize=4096)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    # BLAKE3 over a memory map on every core: a 2.1 GB checkpoint in 0.4 s where SHA-256 took 2.2 s, and the
    # head hashes a checkpoint when a prompt first names it, on the way to the first image.
    h = blake3.blake3(max_threads=blake3.blake3.AUTO)
    if os.path.isdir(path):
        for root, _, files in sorted(os.walk(path)):
            for fn in sorted(files):
                p = os.path.join(root, fn)
                h.update(os.path.relpath(p, path).encode())
                h.update(file_digest(p).encode())
        return h.hexdigest()
    if size:
        h.update_mmap(path)
    return h.hexdigest()


_verify = False


def verify_digests(on: bool = True) -> None:
    """Make `checked_digest` compare files with the digests the head named: on for executors that join over
    TCP, whose model files are their own machine's copies (a shared filesystem or the same files)."""
    global _verify
    _verify = on


def checked_digest(path: str, digest: str | None) -> str:
    """The digest to key `path`'s content by: `digest` as the head computed it, checked against this
    machine's file when `verify_digests` is on (ValueError naming both when they differ)."""
    if digest is None or not _verify:
        return digest or file_digest(path)
    local = file_digest(path)
    if local != digest:
        raise ValueError(
            f"this machine's copy differs from the head's (BLAKE3 {local[:16]}... here, {digest[:16]}... "
            "there): give every node the same model files, or a shared filesystem"
        )
    return digest


# Finds this machine's copy of a file the head named by its own path: (head's path, digest) -> a local path
# holding the same content, or None. The nodes layer installs it (it knows the workspace's model folders).
CopyFinder = Callable[[str, str], "str | None"]
_find_copy: CopyFinder | None = None


def find_copies_with(finder: CopyFinder | None) -> None:
    """Install how `on_this_machine` finds a local copy of a file that is not at the head's path."""
    global _find_copy
    _find_copy = finder


# Fetches a file this machine has no copy of from the head: (head's path, digest) -> the local path it was
# written to. The executor installs it when the head serves its model files (messages.Welcome.files).
_fetch: CopyFinder | None = None


def fetch_missing_with(fetch: CopyFinder | None) -> None:
    """Install how `on_this_machine` gets a file that is neither at the head's path nor copied here."""
    global _fetch
    _fetch = fetch


def _here(path: str, digest: str | None) -> str:
    if digest is None or _find_copy is None or os.path.exists(path):
        return path
    found = _find_copy(path, digest)
    if found is None and _fetch is not None:
        found = _fetch(path, digest)
    if found is None and _verify:  # an executor that joined over TCP: maybe on another machine
        raise FileNotFoundError(
            f"model file {path} is not on this machine: not at the head's path, and no file of "
            f"that name with the head's content (BLAKE3 {digest[:16]}...) in this workspace's "
            "model folders; give every node the same model files, or a shared filesystem"
        )
    return found or path  # none found in-process: the loader's "file not found" names the path


def on_this_machine(ref: ModelRef) -> ModelRef:
    """`ref` with every file the head named (sources, patches) at this machine's copy of it where the head's
    path does not exist here: an executor on another machine keeps the same files in its own workspace's
    model folders, found by name and proven by digest. Load with the result, key caches by `ref.key`."""
    sources = tuple(_here(p, ref.digests[i] if i < len(ref.digests) else None) for i, p in enumerate(ref.sources))
    patches = tuple(replace(p, path=_here(p.path, p.digest)) for p in ref.patches)
    if sources == ref.sources and patches == ref.patches:
        return ref
    return replace(ref, sources=sources, patches=patches)


def file_digest(path: str | os.PathLike) -> str:
    """BLAKE3 of a file's content (a folder's: of its files' names and digests), memoised on (path, size,
    mtime) so a file is read once."""
    st = os.stat(path)
    digest = _digest(os.fspath(path), st.st_size, st.st_mtime_ns)
    if not stat.S_ISDIR(st.st_mode):
        _digested.setdefault(digest, set()).add(os.fspath(path))
    return digest


_digested: dict[str, set[str]] = {}  # digest -> the files of that content this process digested


def digested_file(digest: str) -> str | None:
    """A file with BLAKE3 `digest` that this process digested (the head: those its ModelRefs name) and that
    still has that content; what a data server sends an executor that has no copy."""
    for path in sorted(_digested.get(digest, ())):
        try:
            if file_digest(path) == digest:
                return path
        except OSError:
            continue  # gone since
    return None


@dataclass(frozen=True)
class Patch:
    """A weight patch applied on load: a LoRA file and its strength."""

    path: str
    digest: str
    strength: float


@dataclass(frozen=True)
class ModelRef:
    """Which weights: the MODEL / CLIP / VAE / CONTROL_NET values of a graph are ModelRefs, never tensors.

    `component` is one of "diffusion_model", "text_encoder", "vae", "controlnet".
    `sources` are the files the component is read from (a checkpoint, or separate files for
    DualCLIPLoader); `options` carries settings that change the computation (CLIP skip, CLIP type).
    Equal refs mean equal weights, so a ModelRef is the key of every weight cache.
    """

    component: str
    arch: str
    sources: tuple[str, ...]
    digests: tuple[str, ...]
    patches: tuple[Patch, ...] = ()
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def key(self) -> str:
        h = hashlib.sha256(repr((self.component, self.arch, self.digests, self.patches, self.options)).encode())
        return h.hexdigest()[:16]

    def option(self, name: str, default: Any = None) -> Any:
        return dict(self.options).get(name, default)

    def with_option(self, name: str, value: Any) -> ModelRef:
        opts = dict(self.options)
        opts[name] = value
        return replace(self, options=tuple(sorted(opts.items())))

    def with_patch(self, patch: Patch) -> ModelRef:
        return replace(self, patches=self.patches + (patch,))

    def clone(self) -> ModelRef:
        """ComfyUI's ModelPatcher.clone(): refs are immutable, so a clone is the ref itself."""
        return self
