"""Reading weight files: the safetensors header alone (for detection), whole state dicts (cached by
content digest so one checkpoint feeds several components without re-reading), and loading a state
dict into a module with our own strict checks (diffusers' meta-tensor errors never reach the user)."""

from __future__ import annotations

import json
import os
import struct
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import torch

from cluster.refs import checked_digest

from .errors import ModelLoadError

TORCH_EXTENSIONS = (".ckpt", ".pt", ".pth", ".bin")
_MAX_HEADER = 100 << 20
_DTYPE_SIZES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
}


@dataclass(frozen=True)
class Header:
    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, str]
    metadata: dict[str, str]


def read_header(path: str | os.PathLike) -> Header:
    """Parse and validate a safetensors header without reading the tensors.
    Raises ModelLoadError for a non-safetensors file or one whose data is cut short."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ModelLoadError(path, "is a folder, not a weights file")
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ModelLoadError(path, f"not a safetensors file (only {size} bytes)")
        (n,) = struct.unpack("<Q", head)
        if n == 0 or n > _MAX_HEADER or n > size - 8:
            raise ModelLoadError(
                path, "not a safetensors file (no valid header); if it is a pickled .ckpt, convert it or name it .ckpt"
            )
        raw = f.read(n)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ModelLoadError(path, "not a safetensors file (the header is not JSON)") from None
    if not isinstance(header, dict):
        raise ModelLoadError(path, "not a safetensors file (the header is not a JSON object)")
    metadata = header.pop("__metadata__", None) or {}
    data_len = size - 8 - n
    shapes, dtypes, end = {}, {}, 0
    for key, info in header.items():
        try:
            start, stop = info["data_offsets"]
            shape = tuple(int(s) for s in info["shape"])
            dtype = str(info["dtype"])
        except (KeyError, TypeError, ValueError):
            raise ModelLoadError(path, f"corrupt safetensors header entry for {key!r}") from None
        numel = 1
        for s in shape:
            numel *= s
        if dtype in _DTYPE_SIZES and stop - start != numel * _DTYPE_SIZES[dtype]:
            raise ModelLoadError(path, f"corrupt safetensors header: tensor {key!r} has the wrong byte length")
        shapes[key], dtypes[key], end = shape, dtype, max(end, stop)
    if end > data_len:
        raise ModelLoadError(
            path,
            f"file is truncated: the header needs {end} bytes of tensor data, "
            f"the file holds {data_len} (an interrupted download?)",
        )
    return Header(shapes, dtypes, {str(k): str(v) for k, v in metadata.items()})


def is_torch_pickle(path: str | os.PathLike) -> bool:
    return os.fspath(path).lower().endswith(TORCH_EXTENSIONS)


def _read_state_dict(path: str) -> dict[str, torch.Tensor]:
    if is_torch_pickle(path):
        try:
            obj = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # torch raises many types for a bad pickle
            raise ModelLoadError(path, f"cannot read the torch file ({type(e).__name__}: {e})") from None
        if isinstance(obj, dict) and isinstance(obj.get("state_dict"), dict):
            obj = obj["state_dict"]
        elif isinstance(obj, dict) and len(obj) == 1 and isinstance(next(iter(obj.values())), dict):
            obj = next(iter(obj.values()))  # one wrapped dict, as ComfyUI unwraps it (Real-ESRGAN's params_ema)
        if not isinstance(obj, dict):
            raise ModelLoadError(path, "the torch file holds no state dict")
        return {k: v for k, v in obj.items() if isinstance(v, torch.Tensor)}
    read_header(path)  # friendly errors before safetensors' own
    from safetensors.torch import load_file

    try:
        return load_file(path, device="cpu")
    except Exception as e:
        raise ModelLoadError(path, f"corrupt safetensors file ({e})") from None


class _StateDictCache:
    """A few recently read state dicts keyed by content digest. Callers must not mutate the tensors."""

    def __init__(self, capacity: int = 2) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, dict[str, torch.Tensor]] = OrderedDict()
        self.reads = 0  # files actually read from disk (tests check the cache works)

    def get(self, path: str, digest: str | None = None) -> dict[str, torch.Tensor]:
        try:
            key = checked_digest(path, digest)
        except ValueError as e:
            raise ModelLoadError(path, str(e)) from None
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        sd = _read_state_dict(path)
        self.reads += 1
        self._items[key] = sd
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)
        return sd

    def clear(self) -> None:
        self._items.clear()


CACHE = _StateDictCache()


def load_state_dict(path: str | os.PathLike, digest: str | None = None) -> dict[str, torch.Tensor]:
    """All tensors of a weights file (safetensors or a torch pickle), shared through the cache:
    treat the result as read-only."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ModelLoadError(path, "file not found")
    return CACHE.get(path, digest)


def shapes_of(path: str | os.PathLike) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    """(key -> shape, metadata) read cheaply: the header for safetensors, the whole file for pickles."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ModelLoadError(path, "file not found")
    if is_torch_pickle(path):
        return {k: tuple(v.shape) for k, v in load_state_dict(path).items()}, {}
    h = read_header(path)
    return h.shapes, h.metadata


def build_module(
    factory: Callable[[], torch.nn.Module],
    state_dict: dict[str, torch.Tensor],
    path: str | None,
    what: str,
    dtype: torch.dtype = torch.float32,
) -> torch.nn.Module:
    """Construct `factory()` without initialising its weights and fill it from `state_dict`, refusing
    missing, unexpected or wrongly shaped keys with one ModelLoadError that names `what` and the file."""
    with torch.device("meta"):
        module = factory()
    expected = module.state_dict()
    missing = [k for k in expected if k not in state_dict]
    unexpected = [k for k in state_dict if k not in expected]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing tensor(s), e.g. {', '.join(missing[:3])}")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected tensor(s), e.g. {', '.join(unexpected[:3])}")
        raise ModelLoadError(path, f"the {what} weights do not match its architecture: {'; '.join(parts)}")
    for k, t in expected.items():
        if tuple(state_dict[k].shape) != tuple(t.shape):
            raise ModelLoadError(
                path,
                f"the {what} tensor {k} has shape {tuple(state_dict[k].shape)}, "
                f"the architecture needs {tuple(t.shape)}",
            )
    weights = {k: in_compute_dtype(state_dict[k], dtype) for k in expected}
    module.load_state_dict(weights, strict=True, assign=True)
    _materialize_buffers(module, path, what)
    return module.eval().requires_grad_(False)


ALIGN = 64  # torch's CPU allocator aligns to 64 bytes; BLAS kernels pick their code path (and rounding) by it


def in_compute_dtype(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`t` as a module weight: a float tensor of another dtype (fp16/bf16 files) converted, the one pass
    over its bytes; one already in `dtype` used as it is, a view of the file's private (copy-on-write)
    memory map, so loading copies nothing and no write can reach the file. Only a view that is not
    aligned as torch aligns its own memory is copied: GEMM and convolution kernels choose their code
    path by alignment, and a weight must give the same bits whichever file it came from."""
    if t.is_floating_point() and t.dtype != dtype:
        return t.to(dtype)
    return t.clone() if t.data_ptr() % ALIGN else t


def _materialize_buffers(module: torch.nn.Module, path: str | None, what: str) -> None:
    # Non-persistent buffers are not in any file: CLIP's and BERT's position_ids, BERT's token_type_ids (all zeros,
    # the one segment HunyuanDiT's BERT encodes).
    for name, buf in list(module.named_buffers()):
        if not buf.is_meta:
            continue
        owner_name, _, attr = name.rpartition(".")
        owner = module.get_submodule(owner_name) if owner_name else module
        if attr == "position_ids":
            owner.register_buffer(attr, torch.arange(buf.shape[-1]).expand(buf.shape), persistent=False)
        elif attr == "token_type_ids":
            owner.register_buffer(attr, torch.zeros(buf.shape, dtype=torch.long), persistent=False)
        else:
            raise ModelLoadError(path, f"the {what} has a buffer {name} that no file provides")
