"""CPU data plane: tensors in named shared memory, addressed by metadata.

A producer packs the tensors of one invocation (a call's inputs, or an executor's outputs) into one
named segment, 64-byte aligned, and publishes a `TensorMeta` per tensor. A consumer on the same host
maps the segment by name and copies its tensors out. Segments are files under /dev/shm, so any
process of the host can map or unlink them, and the ones a SIGKILLed executor leaves behind are
removed by name prefix. Names and bounds are checked on read: metadata comes from other processes.
"""
from __future__ import annotations

import itertools
import mmap
import os
import re
import tempfile
from typing import Iterable

import torch

from cluster.messages import TensorMeta

SHM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
_ALIGN = 64
_NAME = re.compile(r"^cc-[A-Za-z0-9_.-]{1,200}$")
_counter = itertools.count()


class ShmError(RuntimeError):
    """A segment is missing (its producer died) or its metadata does not describe it."""


def _path(name: str) -> str:
    if not _NAME.match(name) or ".." in name:
        raise ShmError(f"bad segment name {name!r}")
    return os.path.join(SHM_DIR, name)


def _dtype(name: str) -> torch.dtype:
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise ShmError(f"bad dtype {name!r}")
    return dt


def segment_prefix(owner: str) -> str:
    return f"cc-{re.sub(r'[^A-Za-z0-9_.-]', '_', owner)}-"


def write_tensors(prefix: str, tensors: dict[str, torch.Tensor], owner: str = "") -> dict[str, TensorMeta]:
    """Pack `tensors` into one new segment named `prefix<n>`; returns their metadata."""
    if not tensors:
        return {}
    flat = {k: t.detach().contiguous().cpu() for k, t in tensors.items()}
    offsets, size = {}, 0
    for k, t in flat.items():
        offsets[k] = size
        size += (t.numel() * t.element_size() + _ALIGN - 1) // _ALIGN * _ALIGN
    name = f"{prefix}{os.getpid()}-{next(_counter)}"
    fd = os.open(_path(name), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, max(size, 1))
        with mmap.mmap(fd, max(size, 1)) as mm:
            for k, t in flat.items():
                n = t.numel() * t.element_size()
                if n:
                    dst = torch.frombuffer(mm, dtype=torch.uint8, count=n, offset=offsets[k])
                    dst.copy_(t.reshape(-1).view(torch.uint8))
                    del dst  # the view must go before the map closes
    finally:
        os.close(fd)
    return {k: TensorMeta(name, offsets[k], str(t.dtype).removeprefix("torch."), list(t.shape),
                          t.numel() * t.element_size(), owner) for k, t in flat.items()}


def read_tensors(metas: dict[str, TensorMeta]) -> dict[str, torch.Tensor]:
    """Copy the tensors named by `metas` out of their segments (a missing segment raises ShmError)."""
    out: dict[str, torch.Tensor] = {}
    by_segment: dict[str, list[str]] = {}
    for k, m in metas.items():
        by_segment.setdefault(m.segment, []).append(k)
    for seg, keys in by_segment.items():
        try:
            fd = os.open(_path(seg), os.O_RDONLY)
        except FileNotFoundError:
            raise ShmError(f"segment {seg} is gone (its producer was lost)") from None
        try:
            size = os.fstat(fd).st_size
            with mmap.mmap(fd, size, prot=mmap.PROT_READ) as mm:
                for k in keys:
                    out[k] = _copy_out(mm, size, metas[k])
        finally:
            os.close(fd)
    return out


def _copy_out(mm: mmap.mmap, size: int, m: TensorMeta) -> torch.Tensor:
    dt = _dtype(m.dtype)
    if any(d < 0 for d in m.shape):
        raise ShmError(f"bad shape {m.shape}")
    numel = 1
    for d in m.shape:
        numel *= d
    itemsize = torch.empty((), dtype=dt).element_size()
    if numel * itemsize != m.nbytes or m.offset < 0 or m.offset + m.nbytes > size:
        raise ShmError(f"metadata {m} does not fit its segment of {size} bytes")
    out = torch.empty(m.shape, dtype=dt)
    if m.nbytes:
        # The map is read-only; torch warns on non-writable buffers but only reads from it here.
        src = memoryview(mm)[m.offset:m.offset + m.nbytes]
        out.reshape(-1).view(torch.uint8).numpy()[:] = src
        src.release()
    return out


def unlink(segments: Iterable[str]) -> None:
    for seg in set(segments):
        try:
            os.unlink(_path(seg))
        except (FileNotFoundError, ShmError):
            pass


def unlink_prefix(prefix: str) -> int:
    """Remove every segment whose name starts with `prefix` (a lost producer's arena); returns the count."""
    if not _NAME.match(prefix + "x"):
        raise ShmError(f"bad prefix {prefix!r}")
    names = [n for n in os.listdir(SHM_DIR) if n.startswith(prefix)]
    unlink(names)
    return len(names)
